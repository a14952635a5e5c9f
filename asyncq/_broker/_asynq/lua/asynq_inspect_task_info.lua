-- asynq_inspect_task_info: one task's fields and the score that tells when it runs (read
--   only), as Go's GetTaskInfo reads it plus asyncq's extra fields.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] lease zset         KEYS[3] scheduled zset     KEYS[4] retry zset
-- ARGV[1] task id
-- ARGV[2] task key prefix    asynq:{q}:t:
-- Returns: false if there is no such task, else
--   {id, msg, state, result, score, asyncq_msg, result_enc, started_at, error, limited,
--   traceback}, score
--   the lease expiry of an active task, the run-at time of a scheduled or retry task (Unix s;
--   false when there is none or the task is in another state).
-- @include _asynq_inspect_lib.lua
local state = redis.call('HGET', KEYS[1], 'state')
local score = false
if state == 'active' then
  score = redis.call('ZSCORE', KEYS[2], ARGV[1])
elseif state == 'scheduled' then
  score = redis.call('ZSCORE', KEYS[3], ARGV[1])
elseif state == 'retry' then
  score = redis.call('ZSCORE', KEYS[4], ARGV[1])
end
local row = asynq_inspect_row(ARGV[2], ARGV[1], score)
if not row then
  return false
end
row[#row + 1] = redis.call('HGET', KEYS[1], 'traceback') or ''
return row
