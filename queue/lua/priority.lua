-- priority.lua: task priorities within a queue, and the queue's pause
-- flag. Prepended, before common.lua, to every script of this package
-- (see scripts.go); it declares no KEYS or ARGV of its own.
--
-- A task of priority 0 (the default) lives on the queue's ready list, as
-- tasks always did. A task of another priority p lives on its own list,
-- "<prefix>:{<queue>}:ready:<p>", and its priority is remembered in the
-- hash "<prefix>:{<queue>}:pri" (id -> p) until it is acked, so that a
-- retry, a release or an expired lease puts it back on its own list. The
-- zset "<prefix>:{<queue>}:levels" holds the priorities whose lists may
-- be non-empty (member and score p). Consumers pop the highest priority
-- first, first in first out within one. A queue that never had a
-- prioritized task has neither key, and its scripts pay one EXISTS for
-- them. "<prefix>:{<queue>}:paused" is set while the queue is paused:
-- dequeue then leases nothing. These keys are derived from the ready
-- list's name, so they share its hash tag (its Cluster slot), as the
-- index buckets do.

-- pbase is the keys' common prefix, "<prefix>:{<queue>}:".
local function pbase(ready)
  return string.sub(ready, 1, #ready - 5)
end

-- plist is the ready list of priority p.
local function plist(ready, p)
  if p == 0 then
    return ready
  end
  return pbase(ready) .. 'ready:' .. p
end

-- pchunks runs cmd key ...items in chunks (as callchunks in common.lua).
local function pchunks(cmd, key, items)
  local n = #items
  local i = 1
  while i <= n do
    local j = math.min(i + 999, n)
    redis.call(cmd, key, unpack(items, i, j))
    i = j + 1
  end
end

-- pushlevels pushes bylevel[p] (a list of ids) to the back of priority
-- p's ready list, or to its front if front is true, for each p.
local function pushlevels(ready, bylevel, front)
  local cmd = 'RPUSH'
  if front then
    cmd = 'LPUSH'
  end
  for p, ids in pairs(bylevel) do
    if #ids > 0 then
      pchunks(cmd, plist(ready, p), ids)
      if p ~= 0 then
        redis.call('ZADD', pbase(ready) .. 'levels', p, p)
      end
    end
  end
end

-- prioritized returns the priority hash's key if the queue has one (some
-- task not yet acked has a priority), else nil.
local function prioritized(ready)
  local pri = pbase(ready) .. 'pri'
  if redis.call('EXISTS', pri) == 1 then
    return pri
  end
  return nil
end

-- priorityof returns the remembered priority of id (0 if none).
local function priorityof(pri, id)
  if not pri then
    return 0
  end
  local v = redis.call('HGET', pri, id)
  if v then
    return tonumber(v)
  end
  return 0
end

-- pushready pushes ids to the back (front) of the ready lists of their
-- remembered priorities, keeping their order within each.
local function pushready(ready, ids, front)
  if #ids == 0 then
    return
  end
  local pri = prioritized(ready)
  if not pri then
    local cmd = 'RPUSH'
    if front then
      cmd = 'LPUSH'
    end
    pchunks(cmd, ready, ids)
    return
  end
  local bylevel = {}
  for i = 1, #ids, 1000 do
    local j = math.min(i + 999, #ids)
    local ps = redis.call('HMGET', pri, unpack(ids, i, j))
    for k = i, j do
      local p = 0
      if ps[k - i + 1] then
        p = tonumber(ps[k - i + 1])
      end
      if not bylevel[p] then
        bylevel[p] = {}
      end
      bylevel[p][#bylevel[p] + 1] = ids[k]
    end
  end
  pushlevels(ready, bylevel, front)
end

-- porder returns the priorities to serve, highest first: the recorded
-- levels and 0 among them.
local function porder(ready)
  local levels = pbase(ready) .. 'levels'
  local order = {}
  local zero = false
  for _, v in ipairs(redis.call('ZREVRANGE', levels, 0, -1)) do
    local p = tonumber(v)
    if p < 0 and not zero then
      order[#order + 1] = 0
      zero = true
    end
    order[#order + 1] = p
  end
  if not zero then
    order[#order + 1] = 0
  end
  return order
end

-- popready pops up to max ready ids, highest priority first; false if
-- there are none (as LPOP answers).
local function popready(ready, max)
  local levels = pbase(ready) .. 'levels'
  if redis.call('EXISTS', levels) == 0 then
    return redis.call('LPOP', ready, max)
  end
  local out = {}
  for _, p in ipairs(porder(ready)) do
    local key = plist(ready, p)
    local got = redis.call('LPOP', key, max - #out)
    if got then
      for _, id in ipairs(got) do
        out[#out + 1] = id
      end
    end
    if p ~= 0 and redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', levels, p)
    end
    if #out >= max then
      break
    end
  end
  if #out == 0 then
    return false
  end
  return out
end

-- readylen counts the ready tasks of every priority.
local function readylen(ready)
  local n = redis.call('LLEN', ready)
  local levels = pbase(ready) .. 'levels'
  if redis.call('EXISTS', levels) == 1 then
    for _, v in ipairs(redis.call('ZRANGE', levels, 0, -1)) do
      n = n + redis.call('LLEN', plist(ready, tonumber(v)))
    end
  end
  return n
end

-- listready returns the ready ids from first to last (0-based,
-- inclusive) in the order they will be dequeued, and their priorities.
local function listready(ready, first, last)
  local ids, ps = {}, {}
  local skip = first
  local want = last - first + 1
  for _, p in ipairs(porder(ready)) do
    if #ids >= want then
      break
    end
    local key = plist(ready, p)
    local n = redis.call('LLEN', key)
    if skip >= n then
      skip = skip - n
    else
      for _, id in ipairs(redis.call('LRANGE', key, skip, skip + want - #ids - 1)) do
        ids[#ids + 1] = id
        ps[#ps + 1] = p
      end
      skip = 0
    end
  end
  return ids, ps
end

-- queuepaused reports whether the queue is paused.
local function queuepaused(ready)
  return redis.call('EXISTS', pbase(ready) .. 'paused') == 1
end
