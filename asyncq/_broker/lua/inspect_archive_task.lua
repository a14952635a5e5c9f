-- inspect_archive_task: archive one task that is not running
--   (pending/scheduled/retry/completed/aggregating -> archived).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asyncq:{q}:groups
-- KEYS[8] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[9] archive limits     asyncq:{q}:archive_limits (the queue's caps, else ARGV[4]/[5])
-- ARGV[1] task id
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] now, Unix ms (the archived zset score)
-- ARGV[4] most archived tasks kept
-- ARGV[5] oldest archive entry kept, Unix ms
-- ARGV[6] task key prefix    asyncq:{q}:t:
-- Returns {code, trimmed}: code 1 archived; 0 no such task; -1 the task is active; -2 it is
--   already archived; -3 it is a workflow step waiting for the steps before it (never archived:
--   a re-run would lack its input). trimmed: how many of the oldest archived tasks the caps
--   deleted to make room (0 unless archived). Archiving a workflow step fails its workflow.
-- The uniqueness lock is kept (the task still exists), as when a worker archives a task.
-- Trimming the archive deletes the task hashes of the entries it drops.
-- @include _inspect_lib.lua
-- @include _wf_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'group', 'wf')
if not v[1] then
  return {0, 0}
end
if v[1] == 'active' then
  return {-1, 0}
end
if v[1] == 'archived' then
  return {-2, 0}
end
if v[1] == 'waiting' then
  return {-3, 0}
end
local c = inspect_task_containers()
inspect_detach(c, v[1], ARGV[1], v[2])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'archived')
redis.call('HDEL', KEYS[1], 'pending_since')
asyncq_event(KEYS[1], ARGV[1], v[1], 'archived')
if v[3] then
  asyncq_wf_out(KEYS[1], ARGV[1], v[3], 'f', '-', 'archived by the inspector')
end
local max_size, oldest = asyncq_archive_limits(KEYS[9], ARGV[4], ARGV[5], ARGV[3])
return {1, asyncq_trim_archive(KEYS[5], ARGV[6], oldest, max_size, 1000)}
