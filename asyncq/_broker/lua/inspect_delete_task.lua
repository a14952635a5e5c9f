-- inspect_delete_task: delete one task that is not running (any state but active -> deleted).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asyncq:{q}:groups
-- KEYS[8] aggregation sets   asyncq:{q}:aggregation_sets
-- ARGV[1] task id
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- Returns: 1 deleted; 0 no such task; -1 the task is active (cancel it instead).
-- Deleting a workflow step (or a task a workflow waits for) cancels its workflow.
-- The uniqueness lock is released if this task owns it.
-- @include _inspect_lib.lua
-- @include _wf_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'group', 'unique_key', 'wf')
if not v[1] then
  return 0
end
if v[1] == 'active' then
  return -1
end
local c = inspect_task_containers()
inspect_detach(c, v[1], ARGV[1], v[2])
asyncq_release_unique(v[3], ARGV[1])
asyncq_event(KEYS[1], ARGV[1], v[1], 'deleted')
if v[4] then
  asyncq_wf_out(KEYS[1], ARGV[1], v[4], 'c', '-', 'deleted')
end
redis.call('DEL', KEYS[1])
return 1
