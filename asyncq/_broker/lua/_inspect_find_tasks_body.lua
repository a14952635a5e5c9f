-- The body of inspect_find_tasks, for both layouts: inspect_find_tasks.lua (asyncq's) and
-- asynq_inspect_find_tasks.lua (Go asynq's) document its KEYS, ARGV and reply, and define
-- before including it how a task is matched (inspect_match: what the match's row is built
-- from, or nil) and its row built (inspect_found_row), as the layout stores a task.
local first = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local ids, scores = {}, {}
if ARGV[1] == 'list' then
  local found = redis.call('LRANGE', KEYS[1], -(first + limit), -(first + 1))
  for i = #found, 1, -1 do
    ids[#ids + 1] = found[i]
  end
else
  local pairs_ = redis.call('ZRANGE', KEYS[1], first, first + limit - 1, 'WITHSCORES')
  for i = 1, #pairs_, 2 do
    ids[#ids + 1] = pairs_[i]
    scores[#ids] = pairs_[i + 1]
  end
end
local out = {-1, 0}
local examined = 0
for i, id in ipairs(ids) do
  if #out - 2 >= want then
    break
  end
  examined = i
  local match = inspect_match(ARGV[5], id, ARGV[6], ARGV[7])
  if match then
    local score = scores[i]
    if ARGV[8] == '1' then
      score = redis.call('ZSCORE', KEYS[2], id)
    end
    out[#out + 1] = inspect_found_row(ARGV[5], id, match, score or false)
  end
end
if examined < #ids or #ids == limit then
  out[1] = first + examined
end
out[2] = examined
return out
