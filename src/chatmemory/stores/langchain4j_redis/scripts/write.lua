-- Compare-and-set of one LangChain4j memory string.
-- KEYS[1]: the memory's key (key_prefix .. memory id), the string LangChain4j reads and writes;
-- KEYS[2]: the ids of the latest chatmemory writes of the memory, a list (newest first) in the same hash
--   slot that LangChain4j never reads.
-- ARGV[1]: the SHA-1 (hex) of the value the writer read, or '' when it read no key
-- ARGV[2]: the new value (LangChain4j JSON)
-- ARGV[3]: this write's id, unique to it (sent again unchanged when the driver resends the script)
-- ARGV[4]: the expiry in milliseconds, '0' for none
-- Reply: 1 written now; 2 written by an earlier run of this same write (nothing written now); 0 the key
-- holds something else (nothing written).
-- The ids of the latest 16 writes are kept for an hour after the last one (whatever the value's expiry:
-- they hold no message), far longer than any resend of a write whose reply was lost.
local WRITE_IDS, WRITE_IDS_MS = 16, 3600000
-- A writer whose reply was lost and who sends again finds its own id: that is its write, done already
-- (replied 2: a writer waiting for replicas cannot count them for a write this run did not make).
-- Only the id tells: another writer may well have written the very same value.
local recent = redis.call('LRANGE', KEYS[2], 0, -1)
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
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('LPUSH', KEYS[2], ARGV[3])
redis.call('LTRIM', KEYS[2], 0, WRITE_IDS - 1)
redis.call('PEXPIRE', KEYS[2], WRITE_IDS_MS)
return 1
