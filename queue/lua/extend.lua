-- extend.lua: move the lease deadline of a leased task.
-- KEYS[1] leased zset
-- ARGV[1] task id
-- ARGV[2] new lease deadline, unix ms
-- Returns 1, or 0 if the task is not leased.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[1])
return 1
