-- common.lua: helpers prepended to every script of this package at load
-- time (see scripts.go). It declares no KEYS or ARGV of its own.
--
-- The index is split into NBUCKETS small hashes "<prefix>:{<queue>}:i:<n>",
-- so that each stays in Redis' compact listpack encoding; the bucket of an
-- id is a polynomial hash of its bytes. The bucket keys share the queue's
-- hash tag, so they live in the same Cluster slot as the declared keys; the
-- scripts receive their common prefix as a KEYS entry.
-- An index value is deliveries*4 + state.

local NBUCKETS = 2048
local READY, DELAYED, LEASED, DEAD = 0, 1, 2, 3

local function ikey(iprefix, id)
  local h = 0
  local b = { string.byte(id, 1, -1) }
  for i = 1, #b do
    h = (h * 31 + b[i]) % 2147483647
  end
  return iprefix .. (h % NBUCKETS)
end

-- iget returns the state and delivery count of id, or nil if unknown.
local function iget(iprefix, id)
  local v = redis.call('HGET', ikey(iprefix, id), id)
  if not v then
    return nil, 0
  end
  v = tonumber(v)
  return v % 4, math.floor(v / 4)
end

local function iset(iprefix, id, state, deliveries)
  redis.call('HSET', ikey(iprefix, id), id, deliveries * 4 + state)
end

local function idel(iprefix, id)
  redis.call('HDEL', ikey(iprefix, id), id)
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

-- notify publishes n (tasks that became ready) on channel if a consumer
-- said it is waiting (the flag key exists); it consumes the flag.
local function notify(flag, channel, n)
  if n > 0 and redis.call('DEL', flag) == 1 then
    redis.call('PUBLISH', channel, n)
  end
end

-- promote moves up to limit due delayed tasks and up to limit expired
-- leases (deadline <= now) to the back of the ready list, keeping their
-- delivery counts. It returns the two counts.
local function promote(ready, delayed, leased, iprefix, now, limit)
  local counts = {}
  for k, src in ipairs({ delayed, leased }) do
    local ids = redis.call('ZRANGEBYSCORE', src, '-inf', now, 'LIMIT', 0, limit)
    if #ids > 0 then
      callchunks('ZREM', src, ids)
      callchunks('RPUSH', ready, ids)
      for _, id in ipairs(ids) do
        local _, d = iget(iprefix, id)
        iset(iprefix, id, READY, d)
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
