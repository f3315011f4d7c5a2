-- remove.lua: delete one task in whatever state it is.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] dead zset
-- KEYS[5] dead reasons hash
-- KEYS[6] index bucket prefix
-- ARGV[1] task id
-- Returns 1 if the task existed, else 0.
local id = ARGV[1]
local state, _, key = iget(KEYS[6], id)
if state == nil then
  return 0
end
if state == READY then
  redis.call('LREM', KEYS[1], 0, id)
elseif state == DEAD then
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
else
  redis.call('ZREM', KEYS[state + 1], id)
end
redis.call('HDEL', key, id)
return 1
