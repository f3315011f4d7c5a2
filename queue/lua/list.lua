-- list.lua: a page of the tasks in one state.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- ARGV[1] state: 0 ready, 1 delayed, 2 leased
-- ARGV[2] offset
-- ARGV[3] limit
-- Returns {id1, deliveries1, score1 (ms, or "" for ready), priority1,
-- id2, ...}; ready tasks in the order they will be dequeued, then the
-- routed ones.
local state, first = tonumber(ARGV[1]), tonumber(ARGV[2])
local last = first + tonumber(ARGV[3]) - 1
local pri = prioritized(KEYS[1])
local page, ps = {}, {}
if state == READY then
  local ids
  ids, ps = listready(KEYS[1], first, last)
  -- Then the routed tasks (routed.lua), kind by kind.
  local want = last - first + 1
  if #ids < want then
    local skip = math.max(first - readylen(KEYS[1]), 0)
    for _, id in ipairs((routedlist(KEYS[1], skip, want - #ids))) do
      ids[#ids + 1] = id
    end
  end
  for _, id in ipairs(ids) do
    page[#page + 1] = id
    page[#page + 1] = ''
  end
else
  page = redis.call('ZRANGE', KEYS[state + 1], first, last, 'WITHSCORES')
end
local res = {}
for i = 1, #page, 2 do
  local id = page[i]
  local _, d = iget(KEYS[4], id)
  res[#res + 1] = id
  res[#res + 1] = d
  res[#res + 1] = page[i + 1]
  local p = ps[(i + 1) / 2]
  if p == nil then
    p = priorityof(pri, id)
  end
  res[#res + 1] = p
end
return res
