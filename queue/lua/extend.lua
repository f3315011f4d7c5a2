-- extend.lua: move the lease deadline of a leased task.
-- KEYS[1] leased zset
-- KEYS[2] index bucket prefix
-- ARGV[1] task id
-- ARGV[2] new lease deadline, unix ms
-- Returns 1, or 0 if the task is not leased.
if iget(KEYS[2], ARGV[1]) ~= LEASED then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[1])
return 1
