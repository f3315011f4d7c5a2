-- keyed.lua: the limits a task carries itself (TaskLimit in limits.go):
-- at most N leased tasks per key value, and a token bucket per step (or
-- per step and key value). Prepended after common.lua to the scripts
-- that lease and free tasks. A queue whose tasks never carried limits has
-- no task limit hash, and its scripts pay one EXISTS for them.
-- It declares no KEYS or ARGV of its own.
--
-- The keys, all under the queue's hash tag (one Cluster slot):
--   <prefix>:{<queue>}:lim       hash: id -> the task's limit (tspec)
--   <prefix>:{<queue>}:k:<key>   set: ids that may hold a slot of key;
--                                the truth is the index (LEASED or not)
--   <prefix>:{<queue>}:kw:<key>  zset: ids parked until a slot of key
--                                frees, by the time they first parked
--   <prefix>:{<queue>}:rb:<name> hash: a token bucket, as limits.lua's,
--                                and "w", the turn (unix ms) last given
--                                to a task waiting for a token
--
-- A task over its key's limit is parked, not left at the head of the
-- ready list (it would block the other keys' tasks behind it): it moves
-- to the delayed zset, due when the earliest lease of its key runs out,
-- and into the key's waiters, from which an ack, retry or release of a
-- holder moves the longest waiting back to the front of the ready list at
-- once. A task over its bucket moves to the delayed zset, due at its
-- turn: the k-th task to wait for a bucket is due when the k-th token is,
-- so that waiters do not all wake for the same token. Either way it keeps
-- its delivery count and is not handed out.
--
-- Older versions kept the waiters of a key in a list "kp:<key>"; nothing
-- reads it now (its tasks were also delayed, and fall due by themselves).

-- KEYSCAN bounds how many ready tasks one dequeue looks at.
local KEYSCAN = 100

-- KEYCARRY is how much of a token a task's bucket keeps over its burst,
-- as LIMITCARRY in limits.lua: a waiter dequeued late for its turn does
-- not push every later turn back by its lateness.
local KEYCARRY = 0.9

-- TOKENSLACK absorbs the rounding of the bucket's arithmetic: a waiter
-- due exactly at its turn finds its token, not 0.9999999 of one.
local TOKENSLACK = 1e-6

-- keyed reports whether the scripts must look at task limits: the caller
-- says so (hint "1": its queue's tasks carry limits), or the queue's task
-- limit hash exists (a task with a limit was enqueued by some process).
local function keyed(lim, hint)
  if not lim then
    return false
  end
  return hint == '1' or redis.call('EXISTS', lim) == 1
end

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

-- keyheld counts the ids of key set kset that hold a slot (leased),
-- dropping the others, and returns the earliest lease deadline among
-- them (-1 if none).
local function keyheld(kset, leased, iprefix)
  local n, first = 0, -1
  for _, id in ipairs(redis.call('SMEMBERS', kset)) do
    if iget(iprefix, id) == LEASED then
      local d = tonumber(redis.call('ZSCORE', leased, id) or -1)
      n = n + 1
      if d >= 0 and (first < 0 or d < first) then
        first = d
      end
    else
      redis.call('SREM', kset, id)
    end
  end
  return n, first
end

-- keycount returns the holders of kset as {n, first} (see keyheld),
-- counted once per call: held caches them, and keyadmit counts the tasks
-- it lets through itself.
local function keycount(held, kset, leased, iprefix)
  local c = held[kset]
  if not c then
    local n, first = keyheld(kset, leased, iprefix)
    c = { n = n, first = first }
    held[kset] = c
  end
  return c
end

-- keyadmit decides whether the ready task id (popped, limit spec) may be
-- leased now, with deadline as its lease deadline. If not, it parks it
-- and returns false. held caches the key counts of this call.
local function keyadmit(base, delayed, leased, iprefix, id, spec, now, deadline, held)
  local park = -1
  local kset, count
  if spec.conc > 0 then
    kset = base .. 'k:' .. spec.key
    count = keycount(held, kset, leased, iprefix)
    if count.n >= spec.conc then
      park = count.first
      if park < 0 then
        park = deadline
      end
      redis.call('ZADD', base .. 'kw:' .. spec.key, 'NX', now, id)
    else
      -- Its key lets it through: it waits for that no longer (a waiter
      -- moved to ready by keyfree must not be moved again, out of its
      -- turn for a token).
      redis.call('ZREM', base .. 'kw:' .. spec.key, id)
    end
  end
  local bucket, tokens, bnow, turn
  if park < 0 and spec.rate > 0 then
    bucket = base .. 'rb:' .. spec.rkey
    local b = redis.call('HMGET', bucket, 't', 'at', 'w')
    local at
    tokens, at, turn = tonumber(b[1]), tonumber(b[2]), tonumber(b[3])
    if not tokens or not at then
      tokens, at = spec.burst, now
    end
    -- As in limits.lua: the bucket's time never goes back, or the time
    -- between would be refilled twice.
    bnow = math.max(now, at)
    tokens = math.min(spec.burst + KEYCARRY, tokens + (bnow - at) * spec.rate / spec.per)
    if tokens < 1 - TOKENSLACK then
      local gap = spec.per / spec.rate
      park = bnow + math.max(math.ceil((1 - tokens) * gap), 1)
      -- The turns up to w are promised to tasks that wait already: this
      -- one's is the next token after them.
      if turn and turn >= park then
        park = math.ceil(turn + gap)
      end
      redis.call('HSET', bucket, 'w', park)
      redis.call('PEXPIRE', bucket, park - now + math.ceil(spec.burst * gap) + 1000)
    end
  end
  if park >= 0 then
    redis.call('ZADD', delayed, park, id)
    redis.call('HINCRBY', ikey(iprefix, id), id, DELAYED - READY)
    return false
  end
  if bucket then
    redis.call('HSET', bucket, 't', string.format('%.6f', tokens - 1), 'at', bnow)
    -- An untouched bucket is full again after burst*per/rate, and its
    -- turns are over at "w": drop it after both.
    redis.call('PEXPIRE', bucket, math.max((turn or now) - now, 0) + math.ceil(spec.burst * spec.per / spec.rate) + 1000)
  end
  if kset then
    redis.call('SADD', kset, id)
    count.n = count.n + 1
    if count.first < 0 or deadline < count.first then
      count.first = deadline
    end
  end
  return true
end

-- keyedpop pops up to max ready ids that their own limits let through,
-- looking at KEYSCAN ready ids at most and parking the others. It returns
-- the ids (false if none) and whether it stopped at KEYSCAN with every
-- id it looked at parked and ready ids left behind them: the caller
-- should then look again at once, not sleep. first, if not empty, are
-- ids already popped (routed ones, routed.lua) to look at before the
-- ready list.
local function keyedpop(ready, delayed, leased, iprefix, lim, max, now, deadline, first)
  local base = pbase(ready)
  local out, held, scanned = {}, {}, 0
  while #out < max and scanned < KEYSCAN do
    local got
    if first and #first > 0 then
      got, first = first, nil
    else
      got = popready(ready, math.min(max - #out, KEYSCAN - scanned))
    end
    if not got then
      break
    end
    scanned = scanned + #got
    local specs = redis.call('HMGET', lim, unpack(got))
    for i, id in ipairs(got) do
      local spec = tspec(specs[i])
      if not spec or keyadmit(base, delayed, leased, iprefix, id, spec, now, deadline, held) then
        out[#out + 1] = id
      end
    end
  end
  if #out == 0 then
    return false, scanned >= KEYSCAN and readylen(ready) > 0
  end
  return out, false
end

-- keyfree gives back the key slot of id (acked, retried or released):
-- if it held one (it was leased), the task that waited longest for that
-- key moves back to the front of the ready list. It returns how many it
-- moved (0 or 1). If forget is true (an ack) it also drops the task's
-- limit and its place among the waiters.
local function keyfree(ready, delayed, iprefix, lim, id, forget, held)
  local spec = tspec(redis.call('HGET', lim, id))
  if forget then
    redis.call('HDEL', lim, id)
  end
  if not spec or spec.conc == 0 then
    return 0
  end
  local base = pbase(ready)
  local waiters = base .. 'kw:' .. spec.key
  redis.call('SREM', base .. 'k:' .. spec.key, id)
  if forget then
    redis.call('ZREM', waiters, id)
  end
  if not held then
    return 0
  end
  while true do
    -- ZRANGE and ZREM, not ZPOPMIN: an ACL user granted the commands
    -- of older versions lacks it.
    local p = redis.call('ZRANGE', waiters, 0, 0)[1]
    if not p then
      return 0
    end
    redis.call('ZREM', waiters, p)
    -- A waiter no longer delayed was promoted meanwhile (it is ready or
    -- leased, and takes its own turn).
    if redis.call('ZREM', delayed, p) == 1 then
      redis.call('HINCRBY', ikey(iprefix, p), p, READY - DELAYED)
      pushready(ready, { p }, true)
      return 1
    end
  end
end
