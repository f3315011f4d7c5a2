-- ack.lua: remove tasks for good, whether leased, ready or delayed.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- ARGV[1..] task ids
-- A queue with a concurrency limit (see limits.lua) passes also
-- KEYS[5] waiting flag
-- and then ARGV[1] notify channel, ARGV[2] how to publish, ARGV[3..] ids:
-- the slots an ack frees wake a consumer that waits for one. A queue
-- whose tasks carry limits (keyed.lua) passes these and also
-- KEYS[6] the task limit hash: an ack frees the task's key slot and
-- moves a task parked for it back to ready.
-- Returns the number of tasks removed. A removed task's priority is
-- forgotten (priority.lua).
local n = 0
local pri = prioritized(KEYS[1])
local first = KEYS[5] and 3 or 1
for i = first, #ARGV do
  local id = ARGV[i]
  local key = ikey(KEYS[4], id)
  local gone = redis.call('ZREM', KEYS[3], id) == 1 -- the usual case: leased
  if not gone then
    local state = iget(KEYS[4], id)
    if state == DELAYED then
      gone = redis.call('ZREM', KEYS[2], id) == 1
    elseif state == READY then
      gone = redis.call('LREM', plist(KEYS[1], priorityof(pri, id)), 0, id) > 0
    end
  end
  if KEYS[6] then
    keyfree(KEYS[1], KEYS[2], KEYS[4], KEYS[6], id, true)
  end
  if gone then
    redis.call('HDEL', key, id)
    if pri then
      redis.call('HDEL', pri, id)
    end
    n = n + 1
  end
end
if KEYS[5] and n > 0 then
  notify(KEYS[5], ARGV[1], readylen(KEYS[1]), ARGV[2])
end
return n
