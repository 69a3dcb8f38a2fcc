-- Re-seal elements of one list in place: KEYS[1] the list, then ARGV in threes: index, the element read
-- there, its re-sealed value. An element is replaced only if it still holds what was read (a writer may
-- have trimmed or replaced the list since). Replies how many were replaced.
if redis.call('TYPE', KEYS[1])['ok'] ~= 'list' then
  return 0
end
local done = 0
for i = 1, #ARGV, 3 do
  local index = tonumber(ARGV[i])
  if redis.call('LINDEX', KEYS[1], index) == ARGV[i + 1] then
    redis.call('LSET', KEYS[1], index, ARGV[i + 2])
    done = done + 1
  end
end
return done
