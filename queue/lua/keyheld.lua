-- keyheld.lua: how many tasks hold a slot of a task limit's key (see
-- keyed.lua), for the engine's "why is this step waiting?".
-- KEYS[1] ready list
-- KEYS[2] leased zset
-- KEYS[3] index bucket prefix
-- ARGV[1] the key (TaskLimit.Key)
-- Returns {held, parked}.
local base = pbase(KEYS[1])
local n = keyheld(base .. 'k:' .. ARGV[1], KEYS[2], KEYS[3])
return { n, redis.call('ZCARD', base .. 'kw:' .. ARGV[1]) }
