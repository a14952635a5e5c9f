-- inspect_task_info: one task's fields and the score that tells when it runs (read only).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] lease zset         KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] completion marks   asyncq:{q}:marks (read when there is no task hash, see done.lua)
-- ARGV[1] task id
-- Returns: false if there is no such task, else
--   {msg, payload, state, retried, error, failed_at, completed_at, result, score, result_enc,
--   started_at, traceback, progress, limited} (msg '': a completion mark, state 'completed'
--   and completed_at only), progress being the latest run's report ('' none: see
--   progress.lua), limited the limits a scheduled task waits for ('' none: a task a limit
--   deferred, see limit_acquire.lua),
--   where score is
--   the lease expiry of an active task (false: no lease), the run-at time of a scheduled or
--   retry task, and false otherwise.
local v = redis.call('HMGET', KEYS[1], 'msg', 'payload', 'state', 'retried', 'error',
  'failed_at', 'completed_at', 'result', 'result_enc', 'started_at', 'traceback', 'progress',
  'progress_run', 'limited')
if not v[1] then
  local done = redis.call('ZSCORE', KEYS[5], ARGV[1])
  if not done then
    return false
  end
  return {'', '', 'completed', '0', '', '0', done, false, false, '', '0', '', '', ''}
end
local score = false
if v[3] == 'active' then
  score = redis.call('ZSCORE', KEYS[2], ARGV[1]) or false
elseif v[3] == 'scheduled' then
  score = redis.call('ZSCORE', KEYS[3], ARGV[1]) or false
elseif v[3] == 'retry' then
  score = redis.call('ZSCORE', KEYS[4], ARGV[1]) or false
end
local progress, limited = '', ''
if v[3] == 'scheduled' then
  limited = v[14] or ''
end
if v[12] and v[13] == (v[10] or '') then
  progress = v[12]
end
return {v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '', v[6] or '0', v[7] or '0',
        v[8] or false, score, v[9] or '', v[10] or '0', v[11] or '', progress, limited}
