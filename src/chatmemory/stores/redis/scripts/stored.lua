-- A memory as a batch read of operators' tools sees it: what read.lua (without sliding the expiry) and
-- times.lua tell, in one run; no ARGV, writes nothing.
-- Replies 0 when there is no memory (neither key exists);
-- {'m', version, incarnation, written, expires, records} for a memory;
-- {'c', reason, written, expires, records} for a damaged one, its records as LRANGE has them, so an
-- operator sees them. `written` and `expires` are as times.lua gives them: the server clock in ms at the
-- last write ('' when the metadata does not tell it), the expiry in ms since the epoch ('' for never).
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length', 'written')
local size = redis.call('LLEN', KEYS[2])
local state, reason = judge(head, size)
if state == 'absent' then
  return 0
end
-- The expiry of the metadata, or of the list when the metadata is gone (a damaged memory).
local key = KEYS[1]
if not head[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  key = KEYS[2]
end
-- As times.lua: PEXPIRETIME (Redis 7.0+), else the time left added to the clock.
local expires = redis.pcall('PEXPIRETIME', key)
if type(expires) == 'table' then
  expires = redis.call('PTTL', key)
  if expires >= 0 then
    expires = server_clock() + expires
  end
end
if expires < 0 then
  expires = ''
else
  expires = string.format('%.0f', expires)
end
local written = head[4] or ''
local records = redis.call('LRANGE', KEYS[2], 0, -1)
if state == 'damaged' then
  return {'c', reason, written, expires, records}
end
return {'m', head[1], head[2], written, expires, records}
