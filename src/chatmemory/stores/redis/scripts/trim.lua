-- Remove the entries of a history written before a cutoff. KEYS[1]: the history list (see head.lua).
-- ARGV[1] 'a': ARGV[2] is the cutoff in µs since the epoch; 'r': ARGV[2] µs back from the server clock.
-- Replies how many entries were removed. The window is not touched, nor the history's expiry.
--
-- Entries are in write order, so those written before the cutoff are a prefix: a binary search over
-- their write times (O(log n) LINDEX) finds its end, one LTRIM removes it.
local cutoff
if ARGV[1] == 'a' then
  cutoff = tonumber(ARGV[2])
else
  local _, now_micros = server_clock()
  cutoff = now_micros - tonumber(ARGV[2])
end
local low, high = 0, redis.call('LLEN', KEYS[1])
while low < high do
  local middle = math.floor((low + high) / 2)
  local entry = redis.call('LINDEX', KEYS[1], middle)
  local written = tonumber(string.match(entry, '^%d+:(%d+):'))
  if not written then
    return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[1]
      .. ' holds an entry this store did not write')
  end
  if written * 1000 < cutoff then
    low = middle + 1
  else
    high = middle
  end
end
if low > 0 then
  redis.call('LTRIM', KEYS[1], low, -1)
end
return low
