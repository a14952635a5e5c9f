#!lua flags=allow-oom
-- archive: a task failed for good and is kept for inspection (active -> archived).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] archived zset      asyncq:{q}:archived
-- KEYS[5] processed total    asyncq:{q}:processed
-- KEYS[6] processed today    asyncq:{q}:processed:<YYYY-MM-DD>
-- KEYS[7] failed total       asyncq:{q}:failed
-- KEYS[8] failed today       asyncq:{q}:failed:<YYYY-MM-DD>
-- KEYS[9] archive limits     asyncq:{q}:archive_limits (the queue's caps, else ARGV[7]/[8])
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] error message (the reason)
-- ARGV[4] now, Unix ms (failed_at and the archived zset score)
-- ARGV[5] daily counter expiry, Unix ms
-- ARGV[6] lease cutoff, Unix ms, or '' (as in retry.lua)
-- ARGV[7] most archived tasks kept (default)
-- ARGV[8] oldest archive entry kept, Unix ms (default)
-- ARGV[9] task key prefix    asyncq:{q}:t:
-- ARGV[10] the failure's traceback, bounded ('' = none: an earlier one is removed)
-- Returns: 1 archived; 0 not active under this owner, or its lease was renewed (no change).
-- Trimming deletes the task hashes of the entries it drops (and releases the locks they own),
-- so no orphaned records remain.
-- @include _wf_lib.lua
if not asyncq_may_settle(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[6]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], 'owner')
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'archived', 'error', ARGV[3], 'failed_at', ARGV[4])
asyncq_set_traceback(KEYS[1], ARGV[10])
asyncq_event(KEYS[1], ARGV[1], 'active', 'archived', {error = ARGV[3]})
local wf = redis.call('HGET', KEYS[1], 'wf')
if wf then
  asyncq_wf_out(KEYS[1], ARGV[1], wf, 'f', '-', ARGV[3])
end
local max_size, oldest = asyncq_archive_limits(KEYS[9], ARGV[7], ARGV[8], ARGV[4])
asyncq_trim_archive(KEYS[4], ARGV[9], oldest, max_size, 1000)
asyncq_bump(KEYS[5], KEYS[6], ARGV[5])
asyncq_bump(KEYS[7], KEYS[8], ARGV[5])
return 1
