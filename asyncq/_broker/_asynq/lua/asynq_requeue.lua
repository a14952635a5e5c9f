-- asynq_requeue: give a leased task back, next in line (active -> pending), as Go's Requeue
--   (RPUSH: the end workers pop from); no counters, retried unchanged. Unlike Go it sets
--   pending_since (now), which asyncq's workers read to tell a new run from one they ran.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] pending list       asynq:{q}:pending
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] now, Unix ns
-- ARGV[4] wake channel       asynq:asyncq:wake (asyncq only)
-- ARGV[5] queue name (the wake-up message)
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). When
--   somebody listens, publishes active -> pending; then hands the queue's next task to an idle
--   asyncq worker, or wakes the idle ones (asynq_wake; asyncq only).
-- @include _asynq_lib.lua
if not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('RPUSH', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'pending_since', ARGV[3])
redis.call('HDEL', KEYS[1], 'owner', 'lease_until')
local base = asynq_base(KEYS[4], 'pending')
asynq_events(base)(ARGV[1], 'active', 'pending')
asynq_wake(base, ARGV[4], ARGV[5])
return 1
