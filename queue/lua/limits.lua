-- limits.lua: the flow control of a queue (see Limit in limits.go),
-- prepended after common.lua to the scripts that enforce it. It declares
-- no KEYS or ARGV of its own. With no limit (every bound 0) it calls
-- Redis not at all.
--
-- Concurrency: the leased zset is the set of slots in use, so a slot is
-- freed by every move out of it (ack, retry, release, an expired lease
-- promoted). Rate: a token bucket, a hash "<prefix>:{<queue>}:bucket"
-- with the tokens left ("t", a decimal) at the time "at" (unix ms).

-- LIMITCARRY is how much of a token the bucket keeps over its burst: a
-- consumer late for its token (its timer fired late, the machine was
-- busy) then does not push every later token back by its lateness, up
-- to nine tenths of a token's time. Without it, 20/s over 3 nodes gave
-- 15 to 19 starts a second on a loaded machine. Whole tokens stay at most
-- the burst, so any window of length per still holds at most rate+burst
-- starts; two starts may come a tenth of per/rate apart when the second
-- makes up for the first's lateness.
local LIMITCARRY = 0.9

-- limitcap returns how many of max tasks the limits let the caller lease
-- now, and the limit state for limittake and limitnext.
local function limitcap(leased, bucket, now, max, conc, rate, per, burst)
  local lim = { bucket = bucket, rate = rate, per = per, burst = burst, wake = -1, full = false }
  if conc > 0 then
    local free = conc - redis.call('ZCARD', leased)
    if free <= max then
      max = math.max(free, 0)
      lim.full = true
    end
  end
  if rate > 0 then
    local b = redis.call('HMGET', bucket, 't', 'at')
    local tokens, at = tonumber(b[1]), tonumber(b[2])
    if not tokens or not at then
      tokens, at = burst, now
    end
    -- now is the caller's clock, read before its call: calls of other
    -- consumers may have run in between with later times. The bucket's
    -- time never goes back, or the time between would be refilled twice.
    now = math.max(now, at)
    tokens = math.min(burst + LIMITCARRY, tokens + math.max(now - at, 0) * rate / per)
    lim.tokens = tokens
    local whole = math.floor(tokens)
    if whole <= max then
      max = whole
      lim.full = true
    end
  end
  lim.now = now
  return max, lim
end

-- limittake spends the tokens of n leased tasks; when the bucket is empty
-- it records when the next token is due (lim.wake).
local function limittake(lim, n)
  if lim.rate <= 0 then
    return
  end
  local tokens = lim.tokens - n
  redis.call('HSET', lim.bucket, 't', string.format('%.6f', tokens), 'at', lim.now)
  -- An untouched bucket is full again after burst*per/rate: drop it then.
  redis.call('PEXPIRE', lim.bucket, math.ceil(lim.burst * lim.per / lim.rate) + 1000)
  if tokens < 1 then
    lim.wake = lim.now + math.max(math.ceil((1 - tokens) * lim.per / lim.rate), 1)
  end
end

-- limitnext returns the earlier of due (ms, -1 for none) and the time of
-- the bucket's next token if the caller waits for it.
local function limitnext(lim, due)
  if lim.wake >= 0 and (due < 0 or lim.wake < due) then
    return lim.wake
  end
  return due
end
