#!lua flags=allow-oom
-- requeue: give a running task back unfinished, e.g. at shutdown (active -> pending, next in line).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] pending list       asyncq:{q}:pending
-- KEYS[5] waiters flag       asyncq:{q}:waiters
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] now, Unix ms (pending_since)
-- ARGV[4] wake channel
-- ARGV[5] queue name
-- Returns: 1 requeued; 0 the task is no longer active under this owner (no change).
-- No counters change and `retried` is kept: the task did not fail. The interrupted run's
-- progress report is dropped: the next run starts without one.
-- @include _wake_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner')
if not asyncq_owned(v[1], v[2], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], 'owner', 'progress', 'progress_run')  -- (the interrupted run's report)
redis.call('RPUSH', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'pending_since', ARGV[3])
asyncq_event(KEYS[1], ARGV[1], 'active', 'pending')
asyncq_wake(KEYS[5], ARGV[4], ARGV[5])
return 1
