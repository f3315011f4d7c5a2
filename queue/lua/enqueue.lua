-- enqueue.lua: add tasks that are not ready, delayed or leased yet.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] index bucket prefix
-- KEYS[4] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] how to publish ("s": SPUBLISH, see wake in common.lua)
-- ARGV[3] now, unix ms
-- ARGV[4..] triples: task id, due unix ms (<= now: ready at once),
--          priority (0 the default; see priority.lua)
-- Returns one integer per task: 1 added, 0 already ready, delayed or leased.
-- A delayed task due before every other wakes the waiting consumers, so
-- that they sleep until it is due rather than until their poll interval.
-- An index entry in state 3 (OLDDEAD, left by an older version's dead set)
-- is treated as absent and overwritten: that task can be enqueued again.
local now = tonumber(ARGV[3])
local added, ready = {}, {}
local pri = prioritized(KEYS[1])
local wake = false
for i = 4, #ARGV, 3 do
  local id, due, p = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local state = DELAYED
  if due <= now then
    state = READY
  end
  local key = ikey(KEYS[3], id)
  local fresh = redis.call('HSETNX', key, id, state) == 1
  if not fresh and tonumber(redis.call('HGET', key, id)) % 4 == OLDDEAD then
    iset(key, id, state, 0)
    fresh = true
  end
  if fresh then
    if p ~= 0 then
      pri = pbase(KEYS[1]) .. 'pri'
      redis.call('HSET', pri, id, p)
    elseif pri then
      redis.call('HDEL', pri, id)
    end
    if state == READY then
      if not ready[p] then
        ready[p] = {}
      end
      ready[p][#ready[p] + 1] = id
    else
      if not wake and sooner(KEYS[2], due) then
        wake = true
      end
      redis.call('ZADD', KEYS[2], due, id)
    end
    added[#added + 1] = 1
  else
    added[#added + 1] = 0
  end
end
local nready = 0
for _, ids in pairs(ready) do
  nready = nready + #ids
end
pushlevels(KEYS[1], ready)
if wake then
  wakeall(KEYS[4], ARGV[1], ARGV[2])
else
  notify(KEYS[4], ARGV[1], nready, ARGV[2])
end
return added
