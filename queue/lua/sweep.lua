-- sweep.lua: move due delayed tasks and expired leases to ready.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- KEYS[5] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] now, unix ms
-- ARGV[3] limit for each of the two moves
-- ARGV[4] how to publish ("s": SPUBLISH, see wake in common.lua)
-- Returns {promoted, expired}.
local p, e = promote(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]), tonumber(ARGV[3]))
notify(KEYS[5], ARGV[1], p + e, ARGV[4])
return { p, e }
