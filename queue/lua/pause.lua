-- pause.lua: pause or resume a queue (see priority.lua).
-- KEYS[1] paused flag
-- KEYS[2] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] how to publish ("s": SPUBLISH, see wake in common.lua)
-- ARGV[3] "1" to pause, "0" to resume
-- Returns 1 if the state changed, else 0. Resuming wakes every waiting
-- consumer, so that the queue's tasks are taken at once.
if ARGV[3] == '1' then
  if redis.call('SET', KEYS[1], '1', 'NX') then
    return 1
  end
  return 0
end
local n = redis.call('DEL', KEYS[1])
wakeall(KEYS[2], ARGV[1], ARGV[2])
return n
