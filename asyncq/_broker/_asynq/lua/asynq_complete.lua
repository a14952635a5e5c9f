#!lua flags=allow-oom
-- asynq_complete: a task succeeded and is kept for its retention (active -> completed), as
--   Go's MarkAsComplete: completed_at set in its message, score = completed_at + retention.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] completed zset     asynq:{q}:completed
-- KEYS[5] processed today    asynq:{q}:processed:<YYYY-MM-DD>
-- KEYS[6] processed total    asynq:{q}:processed
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] daily counter expiry, Unix s
-- ARGV[4] now, Unix s (completed_at)
-- ARGV[5] kept until, Unix s (the score)
-- ARGV[6] result encoding ('' when there is no result to write)
-- ARGV[7] result bytes (the field `result`, as Go's ResultWriter writes it)
-- ARGV[8] largest result sent with the completion event, bytes (a larger one: the event says so)
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). When
--   somebody listens, publishes active -> completed with the result (asyncq only).
-- @include _asynq_lib.lua
if not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
local msg = redis.call('HGET', KEYS[1], 'msg') or ''
msg = asynq_pb_edit(msg, {[ASYNQ_COMPLETED_AT] = tonumber(ARGV[4])})
redis.call('HSET', KEYS[1], 'msg', msg, 'state', 'completed')
redis.call('HDEL', KEYS[1], 'owner', 'lease_until')
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'result', ARGV[7], 'result_enc', ARGV[6])
end
asynq_completed_event(asynq_events(asynq_base(KEYS[2], 'active')), ARGV[1], ARGV[6], true,
  ARGV[7], ARGV[8])
asynq_release_lock(KEYS[1], ARGV[1])
asynq_count(KEYS[5], KEYS[6], ARGV[3])
return 1
