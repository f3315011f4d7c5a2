-- kill.lua: move a leased task to the dead set, keeping at most limit
-- dead tasks (the oldest go first, for good).
-- KEYS[1] leased zset
-- KEYS[2] dead zset
-- KEYS[3] dead reasons hash
-- KEYS[4] index bucket prefix
-- ARGV[1] now, unix ms
-- ARGV[2] task id
-- ARGV[3] reason (may be empty)
-- ARGV[4] limit on dead tasks
-- Returns 1, or 0 if the task is not leased.
local id = ARGV[2]
local state, d, key = iget(KEYS[4], id)
if state ~= LEASED then
  return 0
end
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], ARGV[1], id)
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], id, ARGV[3])
end
iset(key, id, DEAD, d)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  callchunks('ZREM', KEYS[2], old)
  callchunks('HDEL', KEYS[3], old)
  for _, o in ipairs(old) do
    redis.call('HDEL', ikey(KEYS[4], o), o)
  end
end
return 1
