#!lua flags=allow-oom
-- asynq_archive: a task failed for good (active -> archived), as Go's Archive: error_msg and
--   last_failed_at set (retried unchanged); then the archive is trimmed as Go trims it: tasks
--   archived before the age cutoff are deleted, then the oldest ones so that at most
--   max size - 1 remain. The lock stays taken.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] archived zset      asynq:{q}:archived
-- KEYS[5] processed today    KEYS[6] failed today
-- KEYS[7] processed total    KEYS[8] failed total
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] error text
-- ARGV[4] now, Unix s (last_failed_at and the score)
-- ARGV[5] age cutoff, Unix s (archived at or before it: deleted)
-- ARGV[6] archive max size (Go: 10000)
-- ARGV[7] daily counter expiry, Unix s
-- ARGV[8] task key prefix    asynq:{q}:t:
-- ARGV[9] traceback ('' none)
-- ARGV[10] the error as Go reads it (error_msg: ARGV[3] without its exception type)
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). When
--   somebody listens, publishes active -> archived with the error (asyncq only).
-- @include _asynq_lib.lua
if not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
local old = redis.call('ZRANGE', KEYS[4], '-inf', ARGV[5], 'BYSCORE')
for _, id in ipairs(old) do
  redis.call('DEL', ARGV[8] .. id)
  redis.call('ZREM', KEYS[4], id)
end
local extra = redis.call('ZRANGE', KEYS[4], 0, -tonumber(ARGV[6]))
for _, id in ipairs(extra) do
  redis.call('DEL', ARGV[8] .. id)
  redis.call('ZREM', KEYS[4], id)
end
if redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  local msg = redis.call('HGET', KEYS[1], 'msg') or ''
  asynq_write_failure(KEYS[1], msg, {[ASYNQ_LAST_FAILED_AT] = tonumber(ARGV[4])}, 'archived',
    ARGV[3], ARGV[10], ARGV[9])
  asynq_events(asynq_base(KEYS[2], 'active'))(ARGV[1], 'active', 'archived', {error = ARGV[3]})
end
asynq_count(KEYS[5], KEYS[7], ARGV[7])
asynq_count(KEYS[6], KEYS[8], ARGV[7])
return 1
