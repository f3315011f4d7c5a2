-- ack.lua: remove tasks for good, whether leased, ready (routed ones
-- too, routed.lua) or delayed.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- KEYS[5] waiting flag
-- KEYS[6] the task limit hash (keyed.lua)
-- ARGV[1] notify channel
-- ARGV[2] how to publish ("s": SPUBLISH, see wake in common.lua)
-- ARGV[3] what the caller knows of the queue's limits: "c" if it has a
--         concurrency limit (limits.lua), "t" if its tasks carry limits
--         (keyed.lua; without "t" the script looks whether the task limit
--         hash exists), both, or "-"
-- ARGV[4..] task ids
-- The slots an ack frees wake a consumer that waits for one: a slot of
-- a queue's concurrency limit, or a key's slot (keyed.lua), which also
-- moves a task parked for it back to ready.
-- Returns the number of tasks removed. A removed task's priority is
-- forgotten (priority.lua).
local n = 0
local pri = prioritized(KEYS[1])
local conc = string.find(ARGV[3], 'c', 1, true) ~= nil
local tasklim = keyed(KEYS[6], string.find(ARGV[3], 't', 1, true) and '1' or '')
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = ikey(KEYS[4], id)
  local gone = redis.call('ZREM', KEYS[3], id) == 1 -- the usual case: leased
  local held = gone
  if not gone then
    local state = iget(KEYS[4], id)
    if state == DELAYED then
      gone = redis.call('ZREM', KEYS[2], id) == 1
    elseif state == READY then
      gone = redis.call('LREM', plist(KEYS[1], priorityof(pri, id)), 0, id) > 0
      if not gone then
        gone = routedremove(KEYS[1], id)
      end
    end
  end
  if tasklim then
    keyfree(KEYS[1], KEYS[2], KEYS[4], KEYS[6], id, true, held)
  end
  if gone then
    redis.call('HDEL', key, id)
    if pri then
      redis.call('HDEL', pri, id)
    end
    n = n + 1
  end
end
if (conc or tasklim) and n > 0 then
  notify(KEYS[5], ARGV[1], readylen(KEYS[1]), ARGV[2])
end
return n
