-- Read a memory. ARGV[1]: ttl in ms to slide the expiry by (0: leave it), ARGV[2]: the caller's cached
-- version, ARGV[3]: its cached incarnation ('' for both when nothing is cached). A KEYS[3] (the history,
-- sent by a store with history and no history_ttl when reads slide the expiry) slides with the window.
-- Replies 1 when the cached snapshot is current (a bare integer: the cheapest reply to send and parse),
-- else {'m', version, incarnation, records}, {'a'} when there is no memory, {'c', reason} when it is damaged.
local ttl = 0
if ARGV[1] ~= '0' then
  local refused
  ttl, refused = checked_ttl(ARGV[1])
  if refused then
    return refused
  end
end
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length')
local size = redis.call('LLEN', KEYS[2])
if head[1] == ARGV[2] and head[2] == ARGV[3] and (not head[3] or tonumber(head[3]) == size) then
  -- The cached snapshot is current (its head was judged sound when it was read): the common case, first.
  if ttl > 0 then
    local now_ms = server_clock()
    set_expiry(now_ms, ttl)
    if KEYS[3] then
      set_history_expiry(now_ms, ttl)
    end
  end
  return 1
end
local state, reason = judge(head, size)
if state == 'damaged' then
  return {'c', reason}
end
if state == 'absent' then
  return {'a'}
end
if ttl > 0 then
  local now_ms = server_clock()
  set_expiry(now_ms, ttl)
  if KEYS[3] then
    set_history_expiry(now_ms, ttl)
  end
end
return {'m', head[1], head[2], redis.call('LRANGE', KEYS[2], 0, -1)}
