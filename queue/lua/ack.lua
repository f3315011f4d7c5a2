-- ack.lua: remove tasks for good, whether leased, ready or delayed.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- ARGV[1..] task ids
-- Returns the number of tasks removed. A removed task's priority is
-- forgotten (priority.lua).
local n = 0
local pri = prioritized(KEYS[1])
for _, id in ipairs(ARGV) do
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
  if gone then
    redis.call('HDEL', key, id)
    if pri then
      redis.call('HDEL', pri, id)
    end
    n = n + 1
  end
end
return n
