#!lua flags=allow-oom
-- cancel: cancel a task, whatever its state, as Celery's revoke does (a cancelled task never
-- runs). A task waiting to run (pending, scheduled, retry, aggregating, a workflow step
-- waiting for the steps before it) is removed: deleted, its uniqueness lock released, an
-- event (deleted, reason 'cancelled') telling whoever waits for it, and its workflow
-- cancelled. A running one gets a cancellation request: a marker key records it, so a worker
-- that misses the pub/sub message (its connection was reconnecting) still sees it on its
-- next lease renewal; the message stays the fast path.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asyncq:{q}:groups
-- KEYS[8] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[9] cancel marker      asyncq:{q}:cancel:<id>
-- ARGV[1] task id
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] marker TTL, ms
-- ARGV[4] cancel channel
-- Returns: 1 the task is active: marker written and message published; 2 it was waiting to
--   run and is removed; 0 no such task; -1 it has ended (completed or archived: nothing
--   written, so a later run of the task is never cancelled by this request).
-- @include _inspect_lib.lua
-- @include _wf_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'group', 'unique_key', 'wf')
if not v[1] then
  return 0
end
if v[1] == 'active' then
  redis.call('SET', KEYS[9], v[2] or '', 'PX', ARGV[3])
  redis.call('PUBLISH', ARGV[4], ARGV[1])
  return 1
end
if v[1] == 'completed' or v[1] == 'archived' then
  return -1
end
inspect_detach(inspect_task_containers(), v[1], ARGV[1], v[3])
asyncq_release_unique(v[4], ARGV[1])
asyncq_event(KEYS[1], ARGV[1], v[1], 'deleted',
  {reason = 'cancelled', error = 'cancelled before it ran'})
if v[5] then
  asyncq_wf_out(KEYS[1], ARGV[1], v[5], 'c', '-', 'cancelled')
end
redis.call('DEL', KEYS[1])
return 2
