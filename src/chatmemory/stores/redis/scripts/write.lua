-- Write a memory.
-- ARGV[1] expected version ('' for an unconditional write), ARGV[2] this write's unique id,
-- ARGV[3] ttl in ms (0: the memory never expires), ARGV[4] mode. With a KEYS[3] (a store with history),
-- ARGV[5] is the history's ttl in ms ('' : it expires with the window), ARGV[6] how many of the last
-- records sent are appended to the history (the client's sequence diff decides), or 'n:e' for n of the
-- window's records and e more sent after them for the history alone (messages evicted within the add
-- that wrote them), recorded before the n; and the mode's own
-- arguments start at ARGV[7] instead of ARGV[5] (below, at ARGV[5+o]: o is 0, or 2 with a history):
--   'f' (full): ARGV[5+o..] are the records of the whole new list;
--   'd' (diff): ARGV[5+o] cached incarnation, ARGV[6+o] span (the first `span` elements are removed),
--   ARGV[7+o] k, ARGV[8+o..7+o+k] the positions (< span) among them that stay, ARGV[8+o+k..] the records to
--   append. The version and incarnation both matching is what proves the list is the cached one.
-- Replies {'w', version, incarnation} once written (a diff: the version alone, as an integer), {'r', version} when this write id had been written
-- already (at that version), {'x'} on a version conflict, {'s'} when a diff's cached incarnation is not the
-- memory's, {'c', reason} when a conditional write finds the memory damaged. Nothing is written unless
-- the reply is 'w' (so a write that loses a conflict records nothing in the history either).
local now_ms, now_micros, now = server_clock()
local ttl, refused = checked_ttl(ARGV[3])
if refused then
  return refused
end
local o, history_ttl, recorded, extra = 0, nil, 0, 0
if KEYS[3] then
  o = 2
  if ARGV[5] ~= '' then
    history_ttl, refused = checked_ttl(ARGV[5])
    if refused then
      return refused
    end
  end
  local counts = ARGV[6]
  local colon = string.find(counts, ':', 1, true)
  if colon then
    recorded, extra = tonumber(string.sub(counts, 1, colon - 1)), tonumber(string.sub(counts, colon + 1))
  else
    recorded = tonumber(counts)
  end
end
-- The records of the window end at nargs; the history-only ones (if any) follow them.
local nargs = #ARGV - extra
local conditional = ARGV[1] ~= ''
if not conditional then
  -- An unconditional write is how an operator replaces a damaged memory: keys of a wrong type go.
  local meta_type = redis.call('TYPE', KEYS[1])['ok']
  if meta_type ~= 'hash' and meta_type ~= 'none' then
    redis.call('DEL', KEYS[1])
  end
  local list_type = redis.call('TYPE', KEYS[2])['ok']
  if list_type ~= 'list' and list_type ~= 'none' then
    redis.call('DEL', KEYS[2])
  end
  if KEYS[3] then
    local history_type = redis.call('TYPE', KEYS[3])['ok']
    if history_type ~= 'list' and history_type ~= 'none' then
      redis.call('DEL', KEYS[3])
    end
  end
end
local head
if KEYS[3] then
  head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length', 'seq', 'hseq')
else
  head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length', 'seq')
end
-- The common turn of a store without history (a diff at the expected version and incarnation, appending
-- 1 to 1000 records) appends first: RPUSH answers the list's new length, so the list's length is known
-- without an LLEN. If the list was not as long as the metadata says, the append is taken back at once
-- (LTRIM; a list it created goes) and the write is judged like any other: nothing stays written.
local size, pushed = nil, false
if not KEYS[3] and ARGV[4] == 'd' and conditional and head[1] == ARGV[1] and ARGV[1] ~= '0' and head[2]
    and head[2] ~= '' and head[2] == ARGV[5] and head[3] then
  local from = ARGV[7] == '0' and 8 or 8 + tonumber(ARGV[7])
  local count = nargs - from + 1
  if count > 0 and count <= 1000 then
    local length = redis.call('RPUSH', KEYS[2], unpack(ARGV, from))
    size = length - count
    if size == tonumber(head[3]) then
      pushed = true
      if from == 8 then
        -- No evicted element stays (no system message kept first): the memory is sound and at the
        -- expected version and incarnation, so the write is finished here, as below but without the
        -- checks it has passed already (the script's most frequent run: every turn of a window memory).
        local span = tonumber(ARGV[6])
        if span > 0 then
          redis.call('LTRIM', KEYS[2], ARGV[6], '-1')
        end
        local written, micros_text = clock_text(now)
        local version, version_number = next_version(head[1], now_micros, micros_text)
        local seq = tonumber(head[4]) or 0
        redis.call('HSET', KEYS[1], 'version', version, 'length', length - span, 'written', written, 'seq',
          seq + 1, 'w' .. (seq % WRITE_SLOTS), ARGV[2] .. '=' .. version)
        set_expiry(now_ms, ttl)
        return version_number
      end
    else
      redis.call('LTRIM', KEYS[2], 0, -count - 1)
    end
  end
end
if not size then
  size = redis.call('LLEN', KEYS[2])
end
local state, reason = 'memory', nil
if not (conditional and head[1] == ARGV[1] and ARGV[1] ~= '0' and head[2] and head[2] ~= ''
    and (not head[3] or tonumber(head[3]) == size)) then
  -- Anything but the common case (the memory is at the expected version and its head is sound) is
  -- judged in full.
  state, reason = judge(head, size)
end
if state == 'damaged' and conditional then
  return {'c', reason}
end
local current = 0
if state == 'memory' then
  current = tonumber(head[1])
end
if (not conditional or tonumber(ARGV[1]) ~= current) and state ~= 'absent' then
  -- Sent again after a lost reply (the driver retries): the write is done already; say so rather than
  -- apply it twice or call it a conflict. Only here are the write ids read: a write that finds the memory
  -- where it expected never needs it.
  local done = written_before(ARGV[2])
  if done then
    return {'r', done}
  end
end
if conditional and tonumber(ARGV[1]) ~= current then
  return {'x'}
end
if ARGV[4] == 'd' and head[2] ~= ARGV[5 + o] then
  return {'s'}
end
-- The write goes ahead. The history is appended first: it is the only command below that can fail (a
-- history key of another type), and then nothing else has been written.
local written, micros_text = clock_text(now)
local hseq = nil
if recorded + extra > 0 then
  if state == 'memory' then
    hseq = tonumber(head[5])
  end
  if not hseq then
    -- No sequence in the metadata (a new memory, or a history that outlived its window): continue from
    -- the last entry, if any.
    local last = redis.call('LINDEX', KEYS[3], -1)
    hseq = 0
    if last then
      hseq = sequence_of(last)
      if not hseq then
        return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[3]
          .. ' ends with an entry this store did not write; nothing was written')
      end
    end
  end
  local stamp = ':' .. written .. ':'
  local entries = {}
  for i = 1, recorded + extra do
    -- The history-only records first (ARGV[nargs + 1..]), then the window's last `recorded`.
    local at = i <= extra and nargs + i or nargs - recorded + i - extra
    entries[#entries + 1] = string.format('%.0f', hseq + i) .. stamp .. ARGV[at]
    if #entries == 1000 then
      redis.call('RPUSH', KEYS[3], unpack(entries))
      entries = {}
    end
  end
  if #entries > 0 then
    redis.call('RPUSH', KEYS[3], unpack(entries))
  end
  hseq = hseq + recorded + extra
end
local first
if ARGV[4] == 'd' then
  local span = tonumber(ARGV[6 + o])
  local kept = tonumber(ARGV[7 + o])
  if span > 0 then
    if kept == 0 then
      redis.call('LTRIM', KEYS[2], span, -1)
    else
      -- Evictions behind a kept head (a system message first): the kept ones are put back server-side,
      -- so the client never sends the window.
      local kept_head = redis.call('LRANGE', KEYS[2], 0, span - 1)
      redis.call('LTRIM', KEYS[2], span, -1)
      for i = 7 + o + kept, 8 + o, -1 do
        redis.call('LPUSH', KEYS[2], kept_head[tonumber(ARGV[i]) + 1])
      end
    end
  end
  first = 8 + o + kept
  size = size - span + kept + nargs - first + 1
else
  redis.call('DEL', KEYS[2])
  first = 5 + o
  size = nargs - 4 - o
end
local last = nargs
if pushed then
  first = last + 1 -- appended above already
end
while first <= last do
  local upto = math.min(first + 999, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
-- A memory's version is its text (judged, or the one the write expected): a new memory starts after 0.
local version, version_number = next_version(state == 'memory' and head[1] or '0', now_micros, micros_text)
local incarnation, seq = head[2], 0
if state == 'memory' then
  seq = tonumber(head[4]) or 0
else
  -- A new memory, or a damaged one replaced: a new incarnation, so no cached snapshot of it survives, and
  -- nothing of the damaged metadata (its history included) stays.
  incarnation = ARGV[2]
  if state == 'damaged' then
    redis.call('DEL', KEYS[1])
  end
end
-- This write's id goes into the next slot of the ring: one short field per write, never the whole history.
local entry = ARGV[2] .. '=' .. version
if hseq then
  if incarnation == head[2] then
    redis.call('HSET', KEYS[1], 'version', version, 'length', size, 'written', written, 'seq', seq + 1,
      'w' .. (seq % WRITE_SLOTS), entry, 'hseq', string.format('%.0f', hseq))
  else
    redis.call('HSET', KEYS[1], 'version', version, 'incarnation', incarnation, 'length', size, 'written',
      written, 'seq', seq + 1, 'w' .. (seq % WRITE_SLOTS), entry, 'hseq', string.format('%.0f', hseq))
  end
elseif incarnation == head[2] then
  redis.call('HSET', KEYS[1], 'version', version, 'length', size, 'written', written, 'seq', seq + 1,
    'w' .. (seq % WRITE_SLOTS), entry)
else
  redis.call('HSET', KEYS[1], 'version', version, 'incarnation', incarnation, 'length', size, 'written', written,
    'seq', seq + 1, 'w' .. (seq % WRITE_SLOTS), entry)
end
set_expiry(now_ms, ttl)
if KEYS[3] then
  set_history_expiry(now_ms, history_ttl or ttl)
end
if ARGV[4] == 'd' then
  -- The cheapest reply to send and parse: the caller knows the incarnation, it sent it.
  return version_number
end
return {'w', version, incarnation}
