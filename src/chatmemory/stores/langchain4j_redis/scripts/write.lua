-- Compare-and-set of one LangChain4j memory string.
-- KEYS[1]: the memory's key (key_prefix .. memory id)
-- ARGV[1]: the SHA-1 (hex) of the value the writer read, or '' when it read no key
-- ARGV[2]: the new value (LangChain4j JSON)
-- ARGV[3]: the new value's SHA-1 (hex)
-- ARGV[4]: the expiry in milliseconds, '0' for none
-- Reply: 1 written; 0 the key holds something else (nothing written).
local current = redis.call('GET', KEYS[1])
local digest = ''
if current then
  digest = redis.sha1hex(current)
end
-- A writer whose reply was lost and who sends again finds its own value: that is its write, not a conflict.
if digest ~= ARGV[1] and digest ~= ARGV[3] then
  return 0
end
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
