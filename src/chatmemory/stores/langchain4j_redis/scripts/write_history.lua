-- Compare-and-set of one LangChain4j memory string and the append of its history, in one atomic run.
-- KEYS[1]: the memory's key (key_prefix .. memory id), the string LangChain4j reads;
-- KEYS[2]: its history, a list in the same hash slot that LangChain4j never reads: one entry per message
--   a write appended, oldest first, 'sequence:written:record' (sequence one more than the entry before,
--   written the server clock in ms, record chatmemory's native record of the message).
-- KEYS[3]: the ids of the latest chatmemory writes of the memory, a list (newest first), same slot.
-- KEYS[4]: where stores before this one kept the history (the memory key .. ':chatmemory-history', same
--   slot): a list there is that history, adopted (renamed to KEYS[2]) when KEYS[2] does not exist; a key
--   of another type there is another memory's and is never touched.
-- ARGV[1]: the SHA-1 (hex) of the value the writer read, or '' when it read no key
-- ARGV[2]: the new value (LangChain4j JSON)
-- ARGV[3]: this write's id, unique to it (sent again unchanged when the driver resends the script)
-- ARGV[4]: the expiry in milliseconds, '0' for none
-- ARGV[5]: the history's expiry in milliseconds ('' : as the value's)
-- ARGV[6..]: the records the write appends to the history (the client's sequence diff decides)
-- Reply: 1 written now; 2 written by an earlier run of this same write (recorded then, nothing written
-- now); 0 the key holds something else (nothing written, nothing recorded).
-- The ids of the latest 16 writes are kept for an hour after the last one (whatever the value's expiry:
-- they hold no message), far longer than any resend of a write whose reply was lost.
local WRITE_IDS, WRITE_IDS_MS = 16, 3600000
-- A writer whose reply was lost and who sends again finds its own id: that is its write, done already
-- (replied 2: a writer waiting for replicas cannot count them for a write this run did not make).
-- Only the id tells: another writer may well have written the very same value.
local recent = redis.call('LRANGE', KEYS[3], 0, -1)
for i = 1, #recent do
  if recent[i] == ARGV[3] then
    return 2
  end
end
local current = redis.call('GET', KEYS[1])
local digest = ''
if current then
  digest = redis.sha1hex(current)
end
if digest ~= ARGV[1] then
  return 0
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if #ARGV > 5 then
  -- Appended first: LINDEX fails on a history key of another type, and then nothing is written.
  local last = redis.call('LINDEX', KEYS[2], -1)
  if not last and redis.call('TYPE', KEYS[4])['ok'] == 'list' then
    redis.call('RENAME', KEYS[4], KEYS[2])
    last = redis.call('LINDEX', KEYS[2], -1)
  end
  local seq = 0
  if last then
    seq = tonumber(string.match(last, '^(%d+):%d+:'))
    if not seq then
      return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[2]
        .. ' ends with an entry this store did not write; nothing was written')
    end
  end
  local stamp = ':' .. string.format('%.0f', now_ms) .. ':'
  local entries = {}
  for i = 6, #ARGV do
    seq = seq + 1
    entries[#entries + 1] = string.format('%.0f', seq) .. stamp .. ARGV[i]
    if #entries == 1000 then
      redis.call('RPUSH', KEYS[2], unpack(entries))
      entries = {}
    end
  end
  if #entries > 0 then
    redis.call('RPUSH', KEYS[2], unpack(entries))
  end
end
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('LPUSH', KEYS[3], ARGV[3])
redis.call('LTRIM', KEYS[3], 0, WRITE_IDS - 1)
redis.call('PEXPIRE', KEYS[3], WRITE_IDS_MS)
local history_ttl = ARGV[4]
if ARGV[5] ~= '' then
  history_ttl = ARGV[5]
end
if history_ttl ~= '0' then
  redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', now_ms + tonumber(history_ttl)))
else
  redis.call('PERSIST', KEYS[2])
end
return 1
