-- release.lua: hand leased tasks back unprocessed: to the front of the
-- ready list of their priority, in the order given, with the delivery undone.
-- KEYS[1] ready list
-- KEYS[2] leased zset
-- KEYS[3] index bucket prefix
-- KEYS[4] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] how to publish ("s": SPUBLISH, see wake in common.lua)
-- ARGV[3] "1" if the caller knows that the queue's tasks carry limits
-- ARGV[4..] task ids
-- KEYS[5] the task limit hash (keyed.lua): if it exists, each task's key
--         slot is given back.
-- Returns the number of tasks released (ids not leased are skipped).
local back = {}
for i = #ARGV, 4, -1 do
  local id = ARGV[i]
  local state, d, key = iget(KEYS[3], id)
  if state == LEASED then
    redis.call('ZREM', KEYS[2], id)
    iset(key, id, READY, math.max(d - 1, 0))
    back[#back + 1] = id
  end
end
local freed = 0
if #back > 0 and keyed(KEYS[5], ARGV[3]) then
  for _, id in ipairs(back) do
    freed = freed + keyfree(KEYS[1], pbase(KEYS[1]) .. 'delayed', KEYS[3], KEYS[5], id, false, true)
  end
end
pushready(KEYS[1], back, true)
notify(KEYS[4], ARGV[1], #back + freed, ARGV[2])
return #back
