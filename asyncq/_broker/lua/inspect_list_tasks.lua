-- inspect_list_tasks: one page of the tasks in a list or zset, with their fields (read only).
-- KEYS[1] source             pending/active list, a state zset, or a group zset
-- KEYS[2] lease zset         asyncq:{q}:lease (read for the active list only)
-- ARGV[1] 'list' or 'zset'
-- ARGV[2] start index, ARGV[3] stop index (LRANGE/ZRANGE semantics, inclusive)
-- ARGV[4] task key prefix    asyncq:{q}:t:
-- ARGV[5] '1' when the source is the active list (each row carries its lease score)
-- Returns: one entry per id that has a task hash, in range order:
--   {id, msg, payload, state, retried, error, failed_at, completed_at, result, score,
--   result_enc, started_at, progress, limited},
--   where score is the zset score, or for the active list the lease expiry (false: no lease),
--   progress the latest run's report and limited the limits a scheduled task waits for ('' none;
--   see inspect_task_info.lua).

-- The row of task `id` (hash `prefix` .. id), nil when it has no hash; its progress report
-- only when it belongs to its latest run.
local function inspect_list_row(prefix, id, score)
  local v = redis.call('HMGET', prefix .. id, 'msg', 'payload', 'state', 'retried', 'error',
    'failed_at', 'completed_at', 'result', 'result_enc', 'started_at', 'progress',
    'progress_run', 'limited')
  if not v[1] then
    return nil
  end
  local progress, limited = '', ''
  if v[3] == 'scheduled' then
    limited = v[13] or ''
  end
  if v[11] and v[12] == (v[10] or '') then
    progress = v[11]
  end
  return {id, v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '', v[6] or '0', v[7] or '0',
          v[8] or false, score, v[9] or '', v[10] or '0', progress, limited}
end
-- @include _inspect_list_tasks_body.lua
