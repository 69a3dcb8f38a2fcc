"""The Lua scripts the Redis store runs: each is one atomic round trip over the two keys of one memory.

A memory is two keys in one hash slot: ``…:meta``, a hash of ``version`` (never repeats for an id, also
across delete and recreate: it is at least the server clock in microseconds), ``incarnation`` (the token
of the write that created the memory, so a snapshot cached by a client can be told apart from a memory
recreated since), and ``token`` (the last write's token, unique to that write, so a write retried after
a lost reply is recognised as done rather than reported as a conflict); and ``…:messages``, a list with one
``dumps_message`` record per message. Both keys always get the same absolute expiry in the same script,
and scripts see a frozen clock, so a memory can never be half expired.
"""

from __future__ import annotations

__all__ = ["READ_SCRIPT", "WRITE_SCRIPT"]

READ_SCRIPT = """
-- KEYS: meta, messages. ARGV: ttl in ms to slide the expiry by (0: leave it), cached version, cached
-- incarnation ('' when nothing is cached).
-- Returns 1 when the caller's cached snapshot is current (a bare integer: the cheapest reply to send and
-- parse), else {version, incarnation, records}: version '' with the list present means the metadata is
-- missing (corrupted), '0' means no memory.
local meta = redis.call('HMGET', KEYS[1], 'version', 'incarnation')
if not meta[1] then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    return {'', '', {}}
  end
  return {'0', '', {}}
end
if ARGV[1] ~= '0' then
  local now = redis.call('TIME')
  local expires = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], expires)
  redis.call('PEXPIREAT', KEYS[2], expires)
end
if meta[1] == ARGV[2] and meta[2] == ARGV[3] then
  return 1
end
return {meta[1], meta[2], redis.call('LRANGE', KEYS[2], 0, -1)}
"""

WRITE_SCRIPT = """
-- KEYS: meta, messages.
-- ARGV[1] expected version ('' for an unconditional write), ARGV[2] this write's unique token,
-- ARGV[3] ttl in ms (0: the memory never expires), ARGV[4] mode:
--   'f' (full): ARGV[5..] are the records of the whole new list;
--   'd' (diff): ARGV[5] cached incarnation, ARGV[6] span (the first `span` elements are removed),
--   ARGV[7] k, ARGV[8..7+k] the positions (< span) among them that stay, ARGV[8+k..] the records to
--   append. The version and incarnation both matching is what proves the list is the cached one.
-- Returns 0 on a version conflict and -1 when the cached snapshot a diff was computed against is not
-- what the server holds. Written, a diff returns the new version as an integer (the caller knows the
-- incarnation: it is the one it sent), a full write {version, incarnation}.
if ARGV[1] == '' then
  -- An unconditional write is how an operator replaces a damaged memory: a meta key of the wrong type
  -- goes (the messages key is deleted below whatever its type).
  local kind = redis.call('TYPE', KEYS[1])['ok']
  if kind ~= 'hash' and kind ~= 'none' then
    redis.call('DEL', KEYS[1])
  end
end
local meta = redis.call('HMGET', KEYS[1], 'version', 'incarnation')
local current = tonumber(meta[1]) or 0
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= current then
  -- The token is only read here: a write whose reply was lost and that the client sent again finds its
  -- own token and reports itself done.
  if redis.call('HGET', KEYS[1], 'token') == ARGV[2] then
    if ARGV[4] == 'd' then
      return current
    end
    return {meta[1], meta[2]}
  end
  return 0
end
local first
if ARGV[4] == 'd' then
  if meta[2] ~= ARGV[5] then
    return -1
  end
  local span = tonumber(ARGV[6])
  local kept = tonumber(ARGV[7])
  if span > 0 then
    if kept == 0 then
      redis.call('LTRIM', KEYS[2], span, -1)
    else
      -- Evictions behind a kept head (a system message first): the kept ones are put back server-side,
      -- so the client never sends the window.
      local head = redis.call('LRANGE', KEYS[2], 0, span - 1)
      redis.call('LTRIM', KEYS[2], span, -1)
      for i = 7 + kept, 8, -1 do
        redis.call('LPUSH', KEYS[2], head[tonumber(ARGV[i]) + 1])
      end
    end
  end
  first = 8 + kept
else
  redis.call('DEL', KEYS[2])
  first = 5
end
local last = #ARGV
while first <= last do
  local upto = math.min(first + 999, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
local now = redis.call('TIME')
local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
local version = math.max(current + 1, micros)
local version_text = string.format('%.0f', version)
local incarnation = meta[2]
if incarnation then
  redis.call('HSET', KEYS[1], 'version', version_text, 'token', ARGV[2])
else
  incarnation = ARGV[2]
  redis.call('HSET', KEYS[1], 'version', version_text, 'incarnation', incarnation, 'token', ARGV[2])
end
if ARGV[3] ~= '0' then
  local expires = string.format('%.0f', math.floor(micros / 1000) + ARGV[3])
  redis.call('PEXPIREAT', KEYS[1], expires)
  redis.call('PEXPIREAT', KEYS[2], expires)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
end
if ARGV[4] == 'd' then
  return version
end
return {version_text, incarnation}
"""
