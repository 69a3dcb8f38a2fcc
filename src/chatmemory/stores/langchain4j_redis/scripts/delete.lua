-- Delete one LangChain4j memory and everything chatmemory keeps beside it, in one atomic run.
-- KEYS[1]: the memory's key; KEYS[2]: its history; KEYS[3]: its latest write ids (all in one hash slot);
-- KEYS[4]: where stores before this one kept the history (the memory key .. ':chatmemory-history'),
--   deleted only if it is a list: a string there is the memory of the id ending so, never touched.
-- Reply: the number of keys deleted.
local deleted = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if redis.call('TYPE', KEYS[4])['ok'] == 'list' then
  deleted = deleted + redis.call('DEL', KEYS[4])
end
return deleted
