-- Give back the lease lock of one memory: KEYS[1] the lock key, ARGV[1] the holder's token.
-- Deletes the lock only while it still holds that token (a lease that ran out may have gone to
-- another writer since). Replies 1 when it was given back, 0 when it was no longer this holder's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
