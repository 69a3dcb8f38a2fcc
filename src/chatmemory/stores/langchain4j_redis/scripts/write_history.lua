-- Compare-and-set of one LangChain4j memory string and the append of its history, in one atomic run.
-- KEYS[1]: the memory's key (key_prefix .. memory id), the string LangChain4j reads;
-- KEYS[2]: its history, a list in the same hash slot that LangChain4j never reads: one entry per message
--   a write appended, oldest first, 'sequence:written:record' (sequence one more than the entry before,
--   written the server clock in ms, record chatmemory's native record of the message).
-- ARGV[1]: the SHA-1 (hex) of the value the writer read, or '' when it read no key
-- ARGV[2]: the new value (LangChain4j JSON)
-- ARGV[3]: the new value's SHA-1 (hex)
-- ARGV[4]: the expiry in milliseconds, '0' for none
-- ARGV[5]: the history's expiry in milliseconds ('' : as the value's)
-- ARGV[6..]: the records the write appends to the history (the client's sequence diff decides)
-- Reply: 1 written; 0 the key holds something else (nothing written, nothing recorded).
local current = redis.call('GET', KEYS[1])
local digest = ''
if current then
  digest = redis.sha1hex(current)
end
if digest ~= ARGV[1] then
  -- A writer whose reply was lost and who sends again finds its own value: that is its write (recorded
  -- then), not a conflict.
  if digest == ARGV[3] then
    return 1
  end
  return 0
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if #ARGV > 5 then
  -- Appended first: LINDEX fails on a history key of another type, and then nothing is written.
  local last = redis.call('LINDEX', KEYS[2], -1)
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
