-- asynq_inspect_run_task: run one task now (scheduled/retry/archived/completed/aggregating ->
--   pending), as Go's RunTask, also setting pending_since (so the queue's latency counts).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asynq:{q}:groups
-- KEYS[8] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] task id
-- ARGV[2] group key prefix   asynq:{q}:g:
-- ARGV[3] now, Unix ns (pending_since)
-- Returns: 1 now pending; 0 no such task; -1 the task is active; -2 it is already pending.
-- The task joins the end of the line (LPUSH: workers pop from the tail).
-- @include _asynq_inspect_lib.lua
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return 0
end
if state == 'active' then
  return -1
end
if state == 'pending' then
  return -2
end
asynq_inspect_detach(inspect_task_containers(), state, ARGV[1], KEYS[1])
asynq_inspect_make_pending(KEYS[1], ARGV[1], state, KEYS[2], ARGV[3])
return 1
