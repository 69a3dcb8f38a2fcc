-- A memory's last write time and expiry, for operators' tools; no ARGV, writes nothing.
-- Replies 0 when neither key exists, else {written, expires}: `written` the server clock in ms at the last
-- write ('' when the metadata does not tell it: written by an earlier version of this store, or damaged),
-- `expires` when the memory expires in ms since the epoch ('' when it never does). A damaged memory is
-- answered too (from whichever key is left): an operator looks at it to repair it.
local meta_type = redis.call('TYPE', KEYS[1])['ok']
local key = KEYS[1]
if meta_type == 'none' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return 0
  end
  key = KEYS[2]
end
local written = ''
if meta_type == 'hash' then
  written = redis.call('HGET', KEYS[1], 'written') or ''
end
-- PEXPIRETIME (Redis 7.0+) tells the expiry itself; before 7.0, the time left added to the clock. A script
-- judges expiry at the instant it started while TIME reads the clock as it runs, so the sum is late by the
-- time in between (about a millisecond).
local expires = redis.pcall('PEXPIRETIME', key)
if type(expires) == 'table' then
  expires = redis.call('PTTL', key)
  if expires >= 0 then
    expires = server_clock() + expires
  end
end
if expires < 0 then
  return {written, ''}
end
return {written, string.format('%.0f', expires)}
