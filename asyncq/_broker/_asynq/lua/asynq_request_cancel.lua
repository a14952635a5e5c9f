#!lua flags=allow-oom
-- asynq_request_cancel: ask for the cancellation of a running task: published on asynq:cancel
--   as Go's Inspector.CancelProcessing does (Go servers and asyncq workers both listen), and,
--   for a run an asyncq worker leased, recorded in the field cancel (the run's started_at),
--   which that worker's next lease renewal reports (a worker that missed the message).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- ARGV[1] task id
-- ARGV[2] cancel channel     asynq:cancel
-- Returns: 1 the task is active (message published), 0 it is not (nothing done: a later run
--   of the task is never cancelled by this request).
local v = redis.call('HMGET', KEYS[1], 'state', 'started_at')
if v[1] ~= 'active' then
  return 0
end
if v[2] then
  redis.call('HSET', KEYS[1], 'cancel', v[2])
end
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
