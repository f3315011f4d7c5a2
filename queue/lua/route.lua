-- route.lua: hand a leased task back for a consumer that can run its
-- kind (routed.lua): the delivery is undone, a key slot it held is given
-- back, and the consumers waiting on the queue are woken.
-- KEYS[1] ready list
-- KEYS[2] leased zset
-- KEYS[3] index bucket prefix
-- KEYS[4] waiting flag
-- KEYS[5] the task limit hash (keyed.lua)
-- ARGV[1] notify channel
-- ARGV[2] how to publish ("s": SPUBLISH, see wake in common.lua)
-- ARGV[3] "1" if the caller knows that the queue's tasks carry limits
-- ARGV[4] task id
-- ARGV[5] its kind
-- Returns 1, or 0 if the task was not leased.
local id, kind = ARGV[4], ARGV[5]
local state, d, key = iget(KEYS[3], id)
if state ~= LEASED then
  return 0
end
local base = pbase(KEYS[1])
redis.call('ZREM', KEYS[2], id)
iset(key, id, READY, math.max(d - 1, 0))
local freed = 0
if keyed(KEYS[5], ARGV[3]) then
  freed = keyfree(KEYS[1], base .. 'delayed', KEYS[3], KEYS[5], id, false, true)
end
redis.call('RPUSH', base .. 'r:' .. kind, id)
redis.call('SADD', base .. 'routed', kind)
redis.call('HSET', base .. 'rk', id, kind)
notify(KEYS[4], ARGV[1], 1 + freed, ARGV[2])
return 1
