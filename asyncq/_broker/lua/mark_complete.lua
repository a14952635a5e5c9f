#!lua flags=allow-oom
-- mark_complete: a task finished and is kept for its retention (active -> completed).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] completed zset     asyncq:{q}:completed
-- KEYS[5] processed total    asyncq:{q}:processed
-- KEYS[6] processed today    asyncq:{q}:processed:<YYYY-MM-DD>
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] daily counter expiry, Unix ms
-- ARGV[4] now, Unix ms (completed_at)
-- ARGV[5] expiry = completed_at + retention, Unix ms (the completed zset score)
-- ARGV[6] the result's encoding, 'b' bytes or 'j' JSON, stored with ARGV[7] as the task's
--   result (the handler's return value); '' to store none
-- ARGV[7] result bytes
-- ARGV[8] largest result sent with the completion event, bytes
-- Returns: 1 completed; 0 the task is no longer active under this owner (no change).
-- @include _wf_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'unique_key', 'wf')
if not asyncq_owned(v[1], v[2], ARGV[2]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], 'owner')
asyncq_release_unique(v[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'completed', 'completed_at', ARGV[4])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'result', ARGV[7], 'result_enc', ARGV[6])
end
-- The event carries the result up to ARGV[8] bytes; a larger one is read from the task.
asyncq_completed_event(KEYS[1], ARGV[1], 'active', ARGV[6], true, ARGV[7],
  ARGV[6] ~= '' and asyncq_result_too_big(ARGV[7], ARGV[8]))
if v[4] then
  asyncq_wf_out(KEYS[1], ARGV[1], v[4], 's', ARGV[6] == '' and '-' or ARGV[6], ARGV[7])
end
asyncq_bump(KEYS[5], KEYS[6], ARGV[3])
return 1
