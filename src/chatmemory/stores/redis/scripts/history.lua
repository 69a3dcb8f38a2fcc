-- Read one page of a history. KEYS[1]: the history list (see head.lua). ARGV[1]: the exclusive sequence
-- bound ('' : from the oldest entry, or the newest with ARGV[3]), ARGV[2]: how many entries at most,
-- ARGV[3]: '1' newest first, '0' oldest first. Replies the entries, in the order asked.
--
-- Sequences in one history are consecutive (each write continues from the last, and trimming only
-- removes a prefix), so the entry with sequence s is at index s - first: a page is one LRANGE, whatever
-- the history's length. Reads change nothing (not even the expiry).
local size = redis.call('LLEN', KEYS[1])
if size == 0 then
  return {}
end
local head = redis.call('LINDEX', KEYS[1], 0)
local first = sequence_of(head)
if not first then
  return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[1]
    .. ' holds an entry this store did not write')
end
local count = tonumber(ARGV[2])
if ARGV[3] == '0' then
  local start = 0
  if ARGV[1] ~= '' then
    start = math.max(0, tonumber(ARGV[1]) - first + 1)
  end
  if start >= size then
    return {}
  end
  return redis.call('LRANGE', KEYS[1], start, start + count - 1)
end
local stop = size - 1
if ARGV[1] ~= '' then
  stop = math.min(stop, tonumber(ARGV[1]) - first - 1)
end
if stop < 0 then
  return {}
end
local page = redis.call('LRANGE', KEYS[1], math.max(0, stop - count + 1), stop)
local newest_first = {}
for i = #page, 1, -1 do
  newest_first[#newest_first + 1] = page[i]
end
return newest_first
