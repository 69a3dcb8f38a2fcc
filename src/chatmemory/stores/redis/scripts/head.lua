-- Shared by read.lua and write.lua (the store puts this text before each): the layout, the server
-- clock, the ttl check and the judgement of a memory's head.
--
-- A memory is two keys in one hash slot. KEYS[1], the metadata hash:
--   version      a positive integer that never repeats for the id, at least the server clock in µs;
--   incarnation  the write id of the write that created the memory (or last replaced a damaged one), so a
--                snapshot cached by a client can be told apart from a memory created again since;
--   length       how many records the list holds, so a list lost on its own (an eviction) is noticed;
--   seq, w0..w15 the latest WRITE_SLOTS writes as 'write_id=version', in a ring (write n of an incarnation
--                goes to field 'w' .. n % WRITE_SLOTS, seq counts them), so a write the client sends again
--                after a lost reply finds itself done instead of applying twice. (Memories written before
--                the ring have their history as 'write_id=version;…' in a field 'writes', still looked up.)
--   written      the server clock (ms since the epoch) at the last write, for operators' tools (a version
--                is only promised to grow, so no time is read from it).
-- KEYS[2], the message list: one record per message, oldest first.
-- KEYS[3], sent only by a store built with history: the history list, one entry per message a write
--   appended, oldest first, each 'sequence:written:record' (sequence a positive integer, one more than the
--   entry before it; written the server clock in ms at that write). The metadata field hseq holds the last
--   sequence given, so a write finds the next one without reading the history; a history that outlived
--   its metadata (a longer history_ttl) is continued from its last entry. No script reads KEYS[3] unless
--   it was sent: without history a write runs the commands it ran before history existed.
--
-- Needs Redis >= 5: scripts are replicated by their effects (the default since 5.0), so they may read
-- TIME and then write. (Calling redis.replicate_commands() for Redis 3.2-4 would cost every run more
-- than the rest of a read.)

local MAX_TTL_MS = 3162240000000 -- 100 * 366 days: what chatmemory.stores.base.options allows
local WRITE_SLOTS = 16 -- the write ids a memory remembers (at least 8 are promised)

-- The server clock in milliseconds and in microseconds: versions and expiries never use a client's clock.
-- The third value, TIME's reply itself, is for clock_text. (Its digits are turned into numbers by
-- arithmetic: tonumber() of a string runs strtod twice, about 500 instructions each; `+ 0` once.)
local function server_clock()
  local now = redis.call('TIME')
  local seconds, micros = now[1] + 0, now[2] + 0
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros, now
end

-- The reading `now` of server_clock as the decimal text of its ms and of its µs since the epoch, put
-- together from TIME's own digits: string.format('%.0f', n) goes through the C library's printf for
-- doubles, about 1,700 instructions a call (a write's whole server side is about 151,500).
local function clock_text(now)
  local micros = string.sub('00000' .. now[2], -6)
  return now[1] .. string.sub(micros, 1, 3), now[1] .. micros
end

-- The version a write gives after `current` (its text, then its value): the clock in µs, or one more
-- than `current` if the clock is not past it. `current` is a version's text (digits, no leading zero),
-- compared as text: a longer one is larger, and of two as long the one later in order.
local function next_version(current, now_micros, micros_text)
  if #micros_text > #current or (#micros_text == #current and micros_text > current) then
    return micros_text, now_micros
  end
  local version = tonumber(current) + 1
  return string.format('%.0f', version), version
end

-- The ttl argument in ms (0: no expiry), or nil and the error reply that stops the script before it
-- writes anything.
local function checked_ttl(text)
  if text == '0' then
    return 0, nil -- a store without ttl: no pattern to match
  end
  -- Read once (as tonumber() reads it twice, see server_clock); a text that is no number is refused.
  local ttl = string.match(text, '^%d+$') and tonumber(text)
  if not ttl or ttl > MAX_TTL_MS then
    return nil, redis.error_reply('ERR chatmemory: a ttl of ' .. text .. ' ms is outside 0..' .. MAX_TTL_MS)
  end
  return ttl, nil
end

-- Judge a memory from its metadata fields {version, incarnation, length, ...} and its list's length:
-- 'absent', 'memory', or 'damaged' and the reason.
local function judge(head, size)
  if not head[1] then
    if redis.call('EXISTS', KEYS[1]) == 0 then
      if size > 0 then
        return 'damaged', 'its message list has no metadata next to it (was a key evicted? '
          .. 'use maxmemory-policy noeviction)'
      end
      return 'absent', nil
    end
    return 'damaged', 'its metadata has no version'
  end
  if not string.match(head[1], '^[1-9]%d*$') then
    return 'damaged', "its version is '" .. head[1] .. "', not a positive integer"
  end
  if not head[2] or head[2] == '' then
    return 'damaged', 'its metadata has no incarnation'
  end
  if head[3] and tonumber(head[3]) ~= size then
    return 'damaged', 'its metadata counts ' .. head[3] .. ' messages but its list holds ' .. size
      .. ' (was a key evicted? use maxmemory-policy noeviction)'
  end
  return 'memory', nil
end

-- Make both keys expire `ttl` ms after `now_ms` (0: never).
local function set_expiry(now_ms, ttl)
  if ttl > 0 then
    local expires = string.format('%.0f', now_ms + ttl)
    redis.call('PEXPIREAT', KEYS[1], expires)
    redis.call('PEXPIREAT', KEYS[2], expires)
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
  end
end

-- Make the history (KEYS[3]) expire like the window (`ttl` ms after `now_ms`, 0: never).
local function set_history_expiry(now_ms, ttl)
  if ttl > 0 then
    redis.call('PEXPIREAT', KEYS[3], string.format('%.0f', now_ms + ttl))
  else
    redis.call('PERSIST', KEYS[3])
  end
end

-- The sequence of a history entry, or nil when the entry was not written by this store.
local function sequence_of(entry)
  return tonumber(string.match(entry, '^(%d+):%d+:'))
end

-- The version the write `write_id` wrote, if it is among the latest of the memory in KEYS[1], else nil.
local function written_before(write_id)
  local fields = {'writes'}
  for slot = 0, WRITE_SLOTS - 1 do
    fields[#fields + 1] = 'w' .. slot
  end
  local entries = redis.call('HMGET', KEYS[1], unpack(fields))
  local marker = write_id .. '='
  for i = 2, #entries do
    local entry = entries[i]
    if entry and string.sub(entry, 1, #marker) == marker then
      return string.sub(entry, #marker + 1)
    end
  end
  if entries[1] then
    -- The history kept before the ring: 'write_id=version;...'.
    local found = string.find(';' .. entries[1], ';' .. marker, 1, true)
    if found then
      return string.match(entries[1], '^%d+', found + #marker)
    end
  end
  return nil
end
