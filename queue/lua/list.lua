-- list.lua: a page of the tasks in one state.
-- KEYS[1] ready list
-- KEYS[2] delayed zset
-- KEYS[3] leased zset
-- KEYS[4] index bucket prefix
-- ARGV[1] state: 0 ready, 1 delayed, 2 leased
-- ARGV[2] offset
-- ARGV[3] limit
-- Returns {id1, deliveries1, score1 (ms, or "" for ready), id2, ...}.
local state, first = tonumber(ARGV[1]), tonumber(ARGV[2])
local last = first + tonumber(ARGV[3]) - 1
local page = {}
if state == READY then
  for _, id in ipairs(redis.call('LRANGE', KEYS[1], first, last)) do
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
end
return res
