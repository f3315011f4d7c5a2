-- ack.lua: remove tasks for good, whether leased, ready or delayed (dead
-- tasks stay until Remove).
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- ARGV[1..] task ids
-- Returns the number of tasks removed.
local n = 0
for _, id in ipairs(ARGV) do
  local state = iget(KEYS[4], id)
  if state ~= nil and state ~= DEAD then
    if state == LEASED then
      redis.call('ZREM', KEYS[3], id)
    elseif state == DELAYED then
      redis.call('ZREM', KEYS[2], id)
    else
      redis.call('LREM', KEYS[1], 0, id)
    end
    idel(KEYS[4], id)
    n = n + 1
  end
end
return n
