-- common.lua: helpers prepended to every script of this package at load
-- time (see scripts.go). It declares no KEYS or ARGV of its own.
--
-- The index is split into NBUCKETS small hashes "<prefix>:{<queue>}:i:<n>",
-- so that each stays in Redis' compact listpack encoding; the bucket of an
-- id is a polynomial hash of its bytes. The bucket keys share the queue's
-- hash tag, so they live in the same Cluster slot as the declared keys; the
-- scripts receive their common prefix as a KEYS entry. The bucket comes
-- from redis.sha1hex, which runs in C: a hash loop in Lua costs 3x more.
-- An index value is deliveries*4 + state, so one HINCRBY both moves a task
-- to another state and counts a delivery.
--
-- The state numbers are stored in users' Redis and never change. State 3
-- was the dead state of older versions, which kept a dead set in Redis;
-- dead letters now live only in the store. A leftover entry in state 3 is
-- in no list or zset of the queue, so only enqueue acts on it: it
-- treats it as absent and overwrites it (see enqueue.lua).

local NBUCKETS = 2048
local READY, DELAYED, LEASED, OLDDEAD = 0, 1, 2, 3

local function ikey(iprefix, id)
  return iprefix .. (tonumber(string.sub(redis.sha1hex(id), 1, 4), 16) % NBUCKETS)
end

-- iget returns the state and delivery count of id (nil, 0 if unknown)
-- and its index bucket key.
local function iget(iprefix, id)
  local key = ikey(iprefix, id)
  local v = redis.call('HGET', key, id)
  if not v then
    return nil, 0, key
  end
  v = tonumber(v)
  return v % 4, math.floor(v / 4), key
end

local function iset(key, id, state, deliveries)
  redis.call('HSET', key, id, deliveries * 4 + state)
end

-- callchunks runs cmd key ...items in chunks (Lua's unpack has a limit).
local function callchunks(cmd, key, items)
  local n = #items
  local i = 1
  while i <= n do
    local j = math.min(i + 999, n)
    redis.call(cmd, key, unpack(items, i, j))
    i = j + 1
  end
end

-- wake publishes msg on channel if a consumer said it is waiting (the
-- flag key exists), and consumes the flag. how is the calling process's
-- own way: "s" with SPUBLISH on the shard channel (on a Redis Cluster,
-- where every process uses a cluster client and listens with SSUBSCRIBE:
-- SPUBLISH reaches only the slot's shard), anything else with PUBLISH.
-- The flag's value is not read: that would need GET, which ACL users of
-- older versions lack.
local function wake(flag, channel, msg, how)
  if redis.call('DEL', flag) == 0 then
    return
  end
  if how == 's' then
    redis.call('SPUBLISH', channel, msg)
  else
    redis.call('PUBLISH', channel, msg)
  end
end

-- notify publishes n (tasks that became ready) on channel if a consumer
-- said it is waiting; it consumes the flag.
local function notify(flag, channel, n, how)
  if n > 0 then
    wake(flag, channel, n, how)
  end
end

-- wakeall publishes "0" (wake every waiter, to look at its timers again)
-- on channel if a consumer said it is waiting; it consumes the flag.
local function wakeall(flag, channel, how)
  wake(flag, channel, 0, how)
end

-- sooner reports whether a task due at due (ms) falls due before every
-- task already in the delayed zset: the waiters' timers are then too late.
local function sooner(delayed, due)
  local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  return #first < 2 or due < tonumber(first[2])
end

-- promote moves up to limit due delayed tasks and up to limit expired
-- leases (deadline <= now) to the back of the ready list of their
-- priority (priority.lua), keeping their delivery counts. It returns the two counts.
local function promote(ready, delayed, leased, iprefix, now, limit)
  local counts = {}
  for k, src in ipairs({ delayed, leased }) do
    local ids = redis.call('ZRANGEBYSCORE', src, '-inf', now, 'LIMIT', 0, limit)
    if #ids > 0 then
      callchunks('ZREM', src, ids)
      pushready(ready, ids)
      -- delayed (1) or leased (2) to ready (0), deliveries unchanged
      for _, id in ipairs(ids) do
        redis.call('HINCRBY', ikey(iprefix, id), id, -k)
      end
    end
    counts[k] = #ids
  end
  return counts[1], counts[2]
end

-- nextdue returns the earliest delayed due time or lease deadline in ms,
-- or -1 if there is neither.
local function nextdue(delayed, leased)
  local best = -1
  for _, src in ipairs({ delayed, leased }) do
    local first = redis.call('ZRANGE', src, 0, 0, 'WITHSCORES')
    if #first == 2 then
      local s = tonumber(first[2])
      if best < 0 or s < best then
        best = s
      end
    end
  end
  return best
end
