-- inspect_list_tasks: one page of the tasks in a list or zset, with their fields (read only).
-- KEYS[1] source             pending/active list, a state zset, or a group zset
-- KEYS[2] lease zset         asyncq:{q}:lease (read for the active list only)
-- ARGV[1] 'list' or 'zset'
-- ARGV[2] start index, ARGV[3] stop index (LRANGE/ZRANGE semantics, inclusive)
-- ARGV[4] task key prefix    asyncq:{q}:t:
-- Returns: one entry per id that has a task hash, in range order:
--   {id, msg, payload, state, retried, error, failed_at, completed_at, result, score,
--   result_enc, started_at, progress},
--   where score is the zset score, or for the active list the lease expiry (false: no lease),
--   and progress the latest run's report ('' none; see inspect_task_info.lua).
local ids
local scores = {}
if ARGV[1] == 'list' then
  ids = redis.call('LRANGE', KEYS[1], ARGV[2], ARGV[3])
  for i, id in ipairs(ids) do
    scores[i] = redis.call('ZSCORE', KEYS[2], id) or false
  end
else
  ids = {}
  local pairs_ = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES')
  for i = 1, #pairs_, 2 do
    ids[#ids + 1] = pairs_[i]
    scores[#ids] = pairs_[i + 1]
  end
end
local out = {}
for i, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[4] .. id, 'msg', 'payload', 'state', 'retried', 'error',
    'failed_at', 'completed_at', 'result', 'result_enc', 'started_at', 'progress',
    'progress_run')
  if v[1] then
    local progress = ''
    if v[11] and v[12] == (v[10] or '') then
      progress = v[11]
    end
    out[#out + 1] = {id, v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '', v[6] or '0',
                     v[7] or '0', v[8] or false, scores[i], v[9] or '', v[10] or '0', progress}
  end
end
return out
