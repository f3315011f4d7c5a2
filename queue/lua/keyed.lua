-- keyed.lua: the limits a task carries itself (TaskLimit in limits.go):
-- at most N leased tasks per key value, and a token bucket per step (or
-- per step and key value). Prepended after common.lua to the scripts of
-- a queue whose Limit has PerTask; a queue without it never loads these
-- keys. It declares no KEYS or ARGV of its own.
--
-- The keys, all under the queue's hash tag (one Cluster slot):
--   <prefix>:{<queue>}:lim       hash: id -> the task's limit (tspec)
--   <prefix>:{<queue>}:k:<key>   set: ids that may hold a slot of key;
--                                the truth is the index (LEASED or not)
--   <prefix>:{<queue>}:kp:<key>  list: ids parked until a slot of key frees
--   <prefix>:{<queue>}:rb:<name> hash: a token bucket, as limits.lua's
--
-- A task over its key's limit is parked, not left at the head of the
-- ready list (it would block the other keys' tasks behind it): it moves
-- to the delayed zset, due when the earliest lease of its key runs out,
-- and onto the key's parked list, from which an ack, retry or release of
-- a holder moves it back to the front of the ready list at once. A task
-- over its bucket moves to the delayed zset, due when the next token is.
-- Either way it keeps its delivery count and is not handed out.

-- KEYSCAN bounds how many ready tasks one dequeue looks at.
local KEYSCAN = 100

-- tspec parses "conc:rate:perms:burst:len:<key><ratekey>".
local function tspec(s)
  if not s then
    return nil
  end
  local c, r, p, b, n, rest = string.match(s, '^(%d+):(%d+):(%d+):(%d+):(%d+):(.*)$')
  if not c then
    return nil
  end
  n = tonumber(n)
  return { conc = tonumber(c), rate = tonumber(r), per = tonumber(p), burst = tonumber(b),
    key = string.sub(rest, 1, n), rkey = string.sub(rest, n + 1) }
end

-- keyheld counts the ids of key set kset that hold a slot (leased, or
-- taken by this call), dropping the others, and returns the earliest
-- lease deadline among them (-1 if none).
local function keyheld(kset, leased, iprefix, taken, deadline)
  local n, first = 0, -1
  for _, id in ipairs(redis.call('SMEMBERS', kset)) do
    local d = -1
    if taken[id] then
      d = deadline
    elseif iget(iprefix, id) == LEASED then
      d = tonumber(redis.call('ZSCORE', leased, id) or deadline)
    else
      redis.call('SREM', kset, id)
    end
    if d >= 0 then
      n = n + 1
      if first < 0 or d < first then
        first = d
      end
    end
  end
  return n, first
end

-- keyadmit decides whether the ready task id (popped, limit spec) may be
-- leased now. If not, it parks it and returns false.
local function keyadmit(base, delayed, leased, iprefix, id, spec, now, deadline, taken)
  local park = -1
  local kset
  if spec.conc > 0 then
    kset = base .. 'k:' .. spec.key
    local n, first = keyheld(kset, leased, iprefix, taken, deadline)
    if n >= spec.conc then
      park = first
      redis.call('RPUSH', base .. 'kp:' .. spec.key, id)
    end
  end
  local bucket, tokens
  if park < 0 and spec.rate > 0 then
    bucket = base .. 'rb:' .. spec.rkey
    local b = redis.call('HMGET', bucket, 't', 'at')
    local at
    tokens, at = tonumber(b[1]), tonumber(b[2])
    if not tokens or not at then
      tokens, at = spec.burst, now
    end
    tokens = math.min(spec.burst, tokens + math.max(now - at, 0) * spec.rate / spec.per)
    if tokens < 1 then
      park = now + math.max(math.ceil((1 - tokens) * spec.per / spec.rate), 1)
    end
  end
  if park >= 0 then
    redis.call('ZADD', delayed, park, id)
    redis.call('HINCRBY', ikey(iprefix, id), id, DELAYED - READY)
    return false
  end
  if bucket then
    redis.call('HSET', bucket, 't', string.format('%.6f', tokens - 1), 'at', now)
    redis.call('PEXPIRE', bucket, math.ceil(spec.burst * spec.per / spec.rate) + 1000)
  end
  if kset then
    redis.call('SADD', kset, id)
  end
  taken[id] = true
  return true
end

-- keyedpop pops up to max ready ids that their own limits let through,
-- looking at KEYSCAN ready ids at most and parking the others; false if
-- none.
local function keyedpop(ready, delayed, leased, iprefix, lim, max, now, deadline)
  local base = pbase(ready)
  local out, taken, scanned = {}, {}, 0
  while #out < max and scanned < KEYSCAN do
    local got = popready(ready, math.min(max - #out, KEYSCAN - scanned))
    if not got then
      break
    end
    scanned = scanned + #got
    local specs = redis.call('HMGET', lim, unpack(got))
    for i, id in ipairs(got) do
      local spec = tspec(specs[i])
      if not spec or keyadmit(base, delayed, leased, iprefix, id, spec, now, deadline, taken) then
        out[#out + 1] = id
      end
    end
  end
  if #out == 0 then
    return false
  end
  return out
end

-- keyfree gives back the key slot of id (acked, retried or released) and
-- moves one task parked for that key back to the front of the ready list;
-- it returns how many it moved (0 or 1). If forget is true it also drops
-- the task's limit.
local function keyfree(ready, delayed, iprefix, lim, id, forget)
  local spec = tspec(redis.call('HGET', lim, id))
  if forget then
    redis.call('HDEL', lim, id)
  end
  if not spec or spec.conc == 0 then
    return 0
  end
  local base = pbase(ready)
  redis.call('SREM', base .. 'k:' .. spec.key, id)
  local parked = base .. 'kp:' .. spec.key
  while true do
    local p = redis.call('LPOP', parked)
    if not p then
      return 0
    end
    -- A parked id no longer delayed was promoted or acked meanwhile.
    if redis.call('ZREM', delayed, p) == 1 then
      redis.call('HINCRBY', ikey(iprefix, p), p, READY - DELAYED)
      pushready(ready, { p }, true)
      return 1
    end
  end
end
