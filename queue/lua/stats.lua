-- stats.lua: count the tasks in each state.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- Returns {ready (every priority, routed ones included), delayed, leased,
-- 1 if paused else 0, routed (routed.lua)}.
local paused = 0
if queuepaused(KEYS[1]) then
  paused = 1
end
local routed = routedlen(KEYS[1])
return {
  readylen(KEYS[1]) + routed,
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  paused,
  routed,
}
