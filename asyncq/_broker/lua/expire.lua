#!lua flags=allow-oom
-- expire: a leased task the worker found expired as it was about to start it is archived unrun
-- (active -> archived): its handler's expires_in ran out (the scripts that lease know only the
-- task's own expiry), or it waited in the worker's prefetch buffer past its expiry.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] the reason (says "expired" and when)
-- ARGV[4] now, Unix ms (failed_at and the archived zset score)
-- ARGV[5] most archived tasks kept (default), ARGV[6] oldest kept, ms of age (default)
-- ARGV[7] lease cutoff, Unix ms, or '' (as in retry.lua)
-- Returns: 1 archived; 0 not active under this owner, or its lease was renewed (no change).
-- No run is counted (processed/failed): it never ran; <base>expired counts it.
-- @include _expire_lib.lua
if not asyncq_may_settle(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[7]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
asyncq_expire(KEYS[1], ARGV[1], 'active', ARGV[3], ARGV[4])
asyncq_expired_trim(asyncq_base(KEYS[1], 't:' .. ARGV[1]), ARGV[4], ARGV[5], ARGV[6])
return 1
