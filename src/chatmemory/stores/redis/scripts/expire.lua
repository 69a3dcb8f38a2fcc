-- Set a memory's expiry: ARGV[1] the time in ms since the epoch ('' : never). Both keys at once, so they
-- never expire apart; a key that does not exist stays absent (PEXPIREAT and PERSIST create nothing), and a
-- time in the past removes both at once. A KEYS[3] (the history of a store whose history expires with the
-- window) gets the same expiry. Replies 1.
if ARGV[1] == '' then
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
  if KEYS[3] then
    redis.call('PERSIST', KEYS[3])
  end
  return 1
end
if not string.match(ARGV[1], '^%d+$') then
  return redis.error_reply('ERR chatmemory: an expiry time of ' .. ARGV[1] .. ' is not a count of ms')
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[1])
if KEYS[3] then
  redis.call('PEXPIREAT', KEYS[3], ARGV[1])
end
return 1
