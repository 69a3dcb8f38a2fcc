-- Adopt a history kept where stores before this one kept it.
-- KEYS[1]: the memory's history key; KEYS[2]: the memory key .. ':chatmemory-history' (same hash slot).
-- A list at KEYS[2] is the history an earlier store wrote (a memory is a string, and a string there is the
-- memory of the id ending so: never touched); it is renamed to KEYS[1] unless KEYS[1] exists already.
-- Reply: 1 adopted, 0 nothing to adopt.
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('TYPE', KEYS[2])['ok'] == 'list' then
  redis.call('RENAME', KEYS[2], KEYS[1])
  return 1
end
return 0
