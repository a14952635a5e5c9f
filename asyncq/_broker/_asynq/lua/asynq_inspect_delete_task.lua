#!lua flags=allow-oom
-- asynq_inspect_delete_task: delete one task that is not running (any state but active ->
--   deleted), as Go's DeleteTask: out of its list/zset/group, its uniqueness lock released if
--   it holds it, its hash deleted.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asynq:{q}:groups
-- KEYS[8] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] task id
-- ARGV[2] group key prefix   asynq:{q}:g:
-- Returns: 1 deleted; 0 no such task; -1 the task is active (cancel it instead).
-- @include _asynq_inspect_lib.lua
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return 0
end
if state == 'active' then
  return -1
end
asynq_inspect_detach(inspect_task_containers(), state, ARGV[1], KEYS[1])
asynq_release_lock(KEYS[1], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
