-- routed.lua: tasks routed to the consumers that can run them (Route in
-- route.go). Prepended, after priority.lua and common.lua, to the scripts
-- that lease, remove, count or list ready tasks; it declares no KEYS or
-- ARGV of its own.
--
-- A consumer that leased a task it cannot run routes it by its kind (the
-- engine's kind is "<workflow>/<step>"): the task leaves the ready lists
-- for the kind's own list, and from then on only a consumer that names
-- the kind in its dequeue takes it. The keys, derived from the ready
-- list's name (the queue's hash tag, one Cluster slot):
--   <prefix>:{<queue>}:routed   set: the kinds that have routed tasks
--   <prefix>:{<queue>}:r:<kind> list: the kind's routed ids, oldest first
--   <prefix>:{<queue>}:rk       hash: id -> kind, while the id is routed
-- A routed task is READY in the index, with the delivery of the consumer
-- that routed it undone. A queue that never routed a task pays one EXISTS
-- per dequeue for it.

-- routedpop pops up to max ids routed to the kinds in wanted (the kinds
-- separated by newlines; "" for none), oldest first within each kind.
-- It returns the ids (a table, perhaps empty), how many routed ids of the
-- wanted kinds are left, and whether the queue has routed tasks at all.
local function routedpop(ready, wanted, max)
  local base = pbase(ready)
  local set = base .. 'routed'
  local out, left = {}, 0
  if redis.call('EXISTS', set) == 0 then
    return out, 0, false
  end
  if wanted == '' then
    return out, 0, true
  end
  local want = {}
  for kind in string.gmatch(wanted, '[^\n]+') do
    want[kind] = true
  end
  for _, kind in ipairs(redis.call('SMEMBERS', set)) do
    if want[kind] then
      local list = base .. 'r:' .. kind
      if #out < max then
        local got = redis.call('LPOP', list, max - #out)
        if got then
          redis.call('HDEL', base .. 'rk', unpack(got))
          for _, id in ipairs(got) do
            out[#out + 1] = id
          end
        end
      end
      local n = redis.call('LLEN', list)
      if n == 0 then
        redis.call('SREM', set, kind)
      end
      left = left + n
    end
  end
  return out, left, true
end

-- routedremove takes id off its kind's list if it is routed, and reports
-- whether it was.
local function routedremove(ready, id)
  local base = pbase(ready)
  local kind = redis.call('HGET', base .. 'rk', id)
  if not kind then
    return false
  end
  redis.call('HDEL', base .. 'rk', id)
  return redis.call('LREM', base .. 'r:' .. kind, 0, id) > 0
end

-- routedlen counts the routed tasks of every kind.
local function routedlen(ready)
  local base = pbase(ready)
  local n = 0
  for _, kind in ipairs(redis.call('SMEMBERS', base .. 'routed')) do
    n = n + redis.call('LLEN', base .. 'r:' .. kind)
  end
  return n
end

-- routedlist returns up to want routed ids, skipping the first skip of
-- them, kind by kind in name order, and their kinds.
local function routedlist(ready, skip, want)
  local base = pbase(ready)
  local kinds = redis.call('SMEMBERS', base .. 'routed')
  table.sort(kinds)
  local ids, ks = {}, {}
  for _, kind in ipairs(kinds) do
    if #ids >= want then
      break
    end
    local list = base .. 'r:' .. kind
    local n = redis.call('LLEN', list)
    if skip >= n then
      skip = skip - n
    else
      for _, id in ipairs(redis.call('LRANGE', list, skip, skip + want - #ids - 1)) do
        ids[#ids + 1] = id
        ks[#ks + 1] = kind
      end
      skip = 0
    end
  end
  return ids, ks
end
