#!lua flags=allow-oom
-- asynq_request_cancel: cancel a task, whatever its state (a cancelled task never runs). A
--   task waiting to run (pending, scheduled, retry, aggregating) is removed as Go's DeleteTask
--   removes it (out of its list/zset/group, its uniqueness lock released, its hash deleted),
--   with an event (deleted, reason 'cancelled') for whoever waits for it. A running one is
--   asked to stop: published on asynq:cancel as Go's Inspector.CancelProcessing does (Go
--   servers and asyncq workers both listen), and, for a run an asyncq worker leased, recorded
--   in the field cancel (the run's started_at), which that worker's next lease renewal reports
--   (a worker that missed the message).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asynq:{q}:groups
-- KEYS[8] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] task id
-- ARGV[2] group key prefix   asynq:{q}:g:
-- ARGV[3] cancel channel     asynq:cancel
-- Returns: 1 the task is active (message published); 2 it was waiting to run and is removed;
--   0 no such task; -1 it has ended (completed or archived: nothing done, so a later run of
--   the task is never cancelled by this request).
-- @include _asynq_inspect_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'started_at')
if not v[1] then
  return 0
end
if v[1] == 'active' then
  if v[2] then
    redis.call('HSET', KEYS[1], 'cancel', v[2])
  end
  redis.call('PUBLISH', ARGV[3], ARGV[1])
  return 1
end
if v[1] == 'completed' or v[1] == 'archived' then
  return -1
end
asynq_inspect_detach(inspect_task_containers(), v[1], ARGV[1], KEYS[1])
asynq_release_lock(KEYS[1], ARGV[1])
asynq_events(asynq_base(KEYS[1], 't:' .. ARGV[1]))(ARGV[1], v[1], 'deleted',
  {reason = 'cancelled', error = 'cancelled before it ran'})
redis.call('DEL', KEYS[1])
return 2
