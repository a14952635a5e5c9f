-- The body of inspect_list_tasks, for both layouts: inspect_list_tasks.lua (asyncq's) and
-- asynq_inspect_list_tasks.lua (Go asynq's) document its KEYS, ARGV and reply, and define
-- before including it the row of one task (inspect_list_row: nil when it has no hash), as the
-- layout stores a task.
local ids, scores = {}, {}
if ARGV[1] == 'list' then
  ids = redis.call('LRANGE', KEYS[1], ARGV[2], ARGV[3])
  if ARGV[5] == '1' then
    for i, id in ipairs(ids) do
      scores[i] = redis.call('ZSCORE', KEYS[2], id)
    end
  end
else
  local pairs_ = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES')
  for i = 1, #pairs_, 2 do
    ids[#ids + 1] = pairs_[i]
    scores[#ids] = pairs_[i + 1]
  end
end
local out = {}
for i, id in ipairs(ids) do
  local row = inspect_list_row(ARGV[4], id, scores[i] or false)
  if row then
    out[#out + 1] = row
  end
end
return out
