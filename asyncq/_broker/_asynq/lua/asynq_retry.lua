#!lua flags=allow-oom
-- asynq_retry: a failed task will run again (active -> retry), as Go's Retry: its message gets
--   retried + 1 (a failure only), error_msg and last_failed_at; the lock stays taken.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] retry zset         asynq:{q}:retry
-- KEYS[5] processed today    KEYS[6] failed today   (asynq:{q}:processed|failed:<date>)
-- KEYS[7] processed total    KEYS[8] failed total   (asynq:{q}:processed|failed)
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] when to run it again, Unix s (the score)
-- ARGV[4] error text
-- ARGV[5] now, Unix s (last_failed_at)
-- ARGV[6] '1' a failure (counted, retried + 1), '0' not one
-- ARGV[7] daily counter expiry, Unix s
-- ARGV[8] traceback ('' none), kept in the field Go ignores
-- ARGV[9] the error as Go reads it (error_msg: ARGV[4] without its exception type)
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). When
--   somebody listens, publishes active -> retry with the error and the next run (asyncq only).
-- @include _asynq_lib.lua
if not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
local msg = redis.call('HGET', KEYS[1], 'msg') or ''
local set = {[ASYNQ_LAST_FAILED_AT] = tonumber(ARGV[5])}
if ARGV[6] == '1' then
  set[ASYNQ_RETRIED] = asynq_pb_get(msg, ASYNQ_RETRIED) + 1
end
asynq_write_failure(KEYS[1], msg, set, 'retry', ARGV[4], ARGV[9], ARGV[8])
asynq_events(asynq_base(KEYS[2], 'active'))(ARGV[1], 'active', 'retry',
  {error = ARGV[4], next = tonumber(ARGV[3]) * 1000})
if ARGV[6] == '1' then
  asynq_count(KEYS[5], KEYS[7], ARGV[7])
  asynq_count(KEYS[6], KEYS[8], ARGV[7])
end
return 1
