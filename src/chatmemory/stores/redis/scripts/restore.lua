-- Put history entries back as they were (SupportsHistoryRestore). KEYS: the metadata hash, the message
-- list, the history list (see head.lua). ARGV[1] the ttl in ms (0: never), ARGV[2] the history's ttl in
-- ms ('' : as the window), ARGV[3] a write id (the incarnation of a window created here), ARGV[4] n, the
-- number of entries, ARGV[5] how many window records follow the entries ('' : no window), then n triples
-- (sequence, written ms, record) in increasing sequence order (consecutive: the client checks), then the
-- window's records.
--
-- Entries whose sequence the history holds are left as they are; those before its first entry are put
-- in front, those after its last at the back. Sequences in a history are consecutive (history.lua reads
-- a page by position), so entries that would leave a gap are refused: the reply is {'g', first, last}
-- (the history's bounds) and nothing is written. With a window and no memory, the window is written as
-- a new memory, recording nothing more. The metadata's hseq moves past the last entry restored. Replies
-- how many entries were added.
local now_ms, now_micros, now = server_clock()
local ttl, refused = checked_ttl(ARGV[1])
if refused then
  return refused
end
local history_ttl = nil
if ARGV[2] ~= '' then
  history_ttl, refused = checked_ttl(ARGV[2])
  if refused then
    return refused
  end
end
local history_type = redis.call('TYPE', KEYS[3])['ok']
if history_type ~= 'list' and history_type ~= 'none' then
  return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[3] .. ' is not a list; nothing was written')
end
local n = tonumber(ARGV[4])
local size = redis.call('LLEN', KEYS[3])
local first, last = nil, nil
if size > 0 then
  first = sequence_of(redis.call('LINDEX', KEYS[3], 0))
  last = sequence_of(redis.call('LINDEX', KEYS[3], -1))
  if not first or not last then
    return redis.error_reply('ERR chatmemory: the history key ' .. KEYS[3]
      .. ' holds an entry this store did not write; nothing was written')
  end
end
local before, after = {}, {}
local before_last, after_first, restored_last = nil, nil, nil
for i = 0, n - 1 do
  local at = 6 + 3 * i
  local sequence = tonumber(ARGV[at])
  local entry = ARGV[at] .. ':' .. ARGV[at + 1] .. ':' .. ARGV[at + 2]
  if not first or sequence > last then
    after[#after + 1] = entry
    after_first = after_first or sequence
    restored_last = sequence
  elseif sequence < first then
    before[#before + 1] = entry
    before_last = sequence
  end
end
if first and ((before_last and before_last ~= first - 1) or (after_first and after_first ~= last + 1)) then
  return {'g', first, last}
end
-- Entries before the first: LPUSH puts each in front, so the last of them goes first.
local i = #before
while i >= 1 do
  local chunk = {}
  while i >= 1 and #chunk < 1000 do
    chunk[#chunk + 1] = before[i]
    i = i - 1
  end
  redis.call('LPUSH', KEYS[3], unpack(chunk))
end
local j = 1
while j <= #after do
  local upto = math.min(j + 999, #after)
  redis.call('RPUSH', KEYS[3], unpack(after, j, upto))
  j = upto + 1
end
local added = #before + #after
local top = restored_last or last
local created = false
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length', 'seq', 'hseq')
if ARGV[5] ~= '' then
  local state = judge(head, redis.call('LLEN', KEYS[2]))
  if state == 'absent' then
    local count = tonumber(ARGV[5])
    local from = 6 + 3 * n
    local k = from
    while k < from + count do
      local upto = math.min(k + 999, from + count - 1)
      redis.call('RPUSH', KEYS[2], unpack(ARGV, k, upto))
      k = upto + 1
    end
    local written, micros_text = clock_text(now)
    local version = next_version('0', now_micros, micros_text)
    local fields = {'version', version, 'incarnation', ARGV[3], 'length', count, 'written', written, 'seq', 1,
      'w0', ARGV[3] .. '=' .. version}
    if top then
      fields[#fields + 1] = 'hseq'
      fields[#fields + 1] = string.format('%.0f', top)
    end
    redis.call('HSET', KEYS[1], unpack(fields))
    set_expiry(now_ms, ttl)
    created = true
  end
end
if not created and top and head[5] and tonumber(head[5]) and tonumber(head[5]) < top then
  -- A write continues from hseq: it must never give a restored sequence again.
  redis.call('HSET', KEYS[1], 'hseq', string.format('%.0f', top))
end
if added > 0 or created then
  set_history_expiry(now_ms, history_ttl or ttl)
end
return added
