-- dequeue.lua: promote due work, then lease up to max ready tasks.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- KEYS[5] waiting flag
-- ARGV[1] notify channel
-- ARGV[2] now, unix ms
-- ARGV[3] lease deadline, unix ms
-- ARGV[4] max tasks to lease
-- ARGV[5] max delayed and max expired tasks to promote
-- ARGV[6] 1 if other consumers of the caller's process wait on this queue
-- ARGV[7] how the caller listens and publishes ("s": on the shard
--         channel, see wake in common.lua; "1": classic); also the waiting
--         flag's value, which older versions read
-- KEYS[6] token bucket of the queue's rate limit (see limits.lua)
-- ARGV[8..11] the queue's limit: concurrency, rate, period ms, burst
--         (all 0: none)
-- KEYS[7] the queue's task limit hash (keyed.lua)
-- ARGV[12] "1" if the caller knows that the queue's tasks carry limits;
--         else the script looks whether the hash exists
-- ARGV[13] the kinds of routed tasks the caller can run, separated by
--         newlines ("" for none; routed.lua)
-- Returns {next due ms or -1 (0 if it leased tasks), ready left, 1 if the
-- queue has routed tasks else 0, id1, deliveries1, id2, ...}.
-- Routed tasks of the caller's kinds are leased first, then ready tasks.
-- Ready tasks are leased highest priority first, and none from a paused
-- queue (priority.lua).
-- When it leases nothing (or leaves the queue empty while others wait) it
-- sets the waiting flag, so that the next enqueue publishes a wake-up.
local now, deadline, max = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
promote(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now, tonumber(ARGV[5]))
local stopped = queuepaused(KEYS[1])
local lim
max, lim = limitcap(KEYS[3], KEYS[6], now, max, tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]))
local ids, more = false, false
local routed, rleft, anyrouted = {}, 0, false
if not stopped and max > 0 then
  routed, rleft, anyrouted = routedpop(KEYS[1], ARGV[13] or '', max)
  if keyed(KEYS[7], ARGV[12]) then
    ids, more = keyedpop(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], max, now, tonumber(deadline), routed)
  else
    ids = routed
    if #ids < max then
      local got = popready(KEYS[1], max - #ids)
      if got then
        for _, id in ipairs(got) do
          ids[#ids + 1] = id
        end
      end
    end
    if #ids == 0 then
      ids = false
    end
  end
else
  anyrouted = redis.call('EXISTS', pbase(KEYS[1]) .. 'routed') == 1
end
limittake(lim, ids and #ids or 0)
local res = { 0, 0, 0 }
if ids then
  local zargs = {}
  for _, id in ipairs(ids) do
    -- ready (0) to leased (2), one more delivery (4)
    local d = math.floor(redis.call('HINCRBY', ikey(KEYS[4], id), id, 6) / 4)
    zargs[#zargs + 1] = deadline
    zargs[#zargs + 1] = id
    res[#res + 1] = id
    res[#res + 1] = d
  end
  callchunks('ZADD', KEYS[3], zargs)
end
-- What is left for the caller: ready tasks and routed ones of its kinds
-- (the routed tasks of other kinds must not wake it again and again).
local left = readylen(KEYS[1]) + rleft
if stopped then
  -- A paused queue offers nothing: the caller waits for Resume's wake-up.
  left = 0
end
if (left == 0 and (not ids or ARGV[6] == '1')) or (left > 0 and lim.full) then
  -- Nothing to take, or what is left is over the limit: wait for a
  -- wake-up (an enqueue, Resume, or a slot freed, see ack.lua).
  redis.call('SET', KEYS[5], ARGV[7])
elseif left > 0 then
  notify(KEYS[5], ARGV[1], left, ARGV[7])
end
if stopped then
  res[1] = -1
elseif more then
  -- Every task it looked at was parked by its own limit, and more are
  -- ready behind them: look again at once.
  res[1] = 0
elseif not ids then
  res[1] = limitnext(lim, nextdue(KEYS[2], KEYS[3]))
end
res[2] = left
if anyrouted then
  res[3] = 1
end
return res
