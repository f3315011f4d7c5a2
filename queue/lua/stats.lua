-- stats.lua: count the tasks in each state.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- Returns {ready, delayed, leased}.
return {
  redis.call('LLEN', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
}
