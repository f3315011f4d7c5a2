-- retry.lua: move a leased task to delayed (or to ready if already due).
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- KEYS[5] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] now, unix ms
-- ARGV[3] task id
-- ARGV[4] due, unix ms
-- ARGV[5] how to publish ("s": SPUBLISH, see wake in common.lua)
-- KEYS[6] the task limit hash (keyed.lua): if it exists, the task's
--         key slot is given back.
-- ARGV[6] "1" if the caller knows that the queue's tasks carry limits
-- Returns 1, or 0 if the task is not leased. A task due before every
-- other delayed one wakes the waiting consumers (see enqueue.lua).
local id, due = ARGV[3], tonumber(ARGV[4])
local state, d, key = iget(KEYS[4], id)
if state ~= LEASED then
  return 0
end
redis.call('ZREM', KEYS[3], id)
if keyed(KEYS[6], ARGV[6]) then
  notify(KEYS[5], ARGV[1], keyfree(KEYS[1], KEYS[2], KEYS[4], KEYS[6], id, false, true), ARGV[5])
end
if due <= tonumber(ARGV[2]) then
  pushready(KEYS[1], { id })
  iset(key, id, READY, d)
  notify(KEYS[5], ARGV[1], 1, ARGV[5])
else
  if sooner(KEYS[2], due) then
    wakeall(KEYS[5], ARGV[1], ARGV[5])
  end
  redis.call('ZADD', KEYS[2], due, id)
  iset(key, id, DELAYED, d)
end
return 1
