-- stats.lua: count the tasks in each state.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- Returns {ready (every priority), delayed, leased, 1 if paused else 0}.
local paused = 0
if queuepaused(KEYS[1]) then
  paused = 1
end
return {
  readylen(KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  paused,
}
