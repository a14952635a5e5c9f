-- inspect_run_task: run one task now (scheduled/retry/archived/completed/aggregating -> pending).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asyncq:{q}:groups
-- KEYS[8] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[9] waiters flag       asyncq:{q}:waiters
-- ARGV[1] task id
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] now, Unix ms (becomes pending_since)
-- ARGV[4] wake channel
-- ARGV[5] queue name
-- Returns: 1 now pending; 0 no such task; -1 the task is active; -2 it is already pending;
--   -3 it is a workflow step waiting for the steps before it (its workflow releases it).
-- The task joins the end of the line (LPUSH: workers pop from the tail). Its previous run's
-- progress report is dropped: the run asked for has reported nothing yet.
-- @include _wake_lib.lua
-- @include _inspect_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'group')
if not v[1] then
  return 0
end
if v[1] == 'active' then
  return -1
end
if v[1] == 'pending' then
  return -2
end
if v[1] == 'waiting' then
  return -3
end
local c = inspect_task_containers()
inspect_detach(c, v[1], ARGV[1], v[2])
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'pending_since', ARGV[3])
redis.call('HDEL', KEYS[1], 'completed_at', 'progress', 'progress_run')
asyncq_event(KEYS[1], ARGV[1], v[1], 'pending')
asyncq_wake(KEYS[9], ARGV[4], ARGV[5])
return 1
