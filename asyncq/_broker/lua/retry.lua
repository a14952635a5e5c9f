#!lua flags=allow-oom
-- retry: a run failed and will be tried again later (active -> retry).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] retry zset         asyncq:{q}:retry
-- KEYS[5] processed total    asyncq:{q}:processed
-- KEYS[6] processed today    asyncq:{q}:processed:<YYYY-MM-DD>
-- KEYS[7] failed total       asyncq:{q}:failed
-- KEYS[8] failed today       asyncq:{q}:failed:<YYYY-MM-DD>
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] retry at, Unix ms (the retry zset score)
-- ARGV[4] error message
-- ARGV[5] now, Unix ms (failed_at)
-- ARGV[6] '1' if this counts as a failure (retried + 1, failure counters), '0' if not
-- ARGV[7] daily counter expiry, Unix ms
-- ARGV[8] lease cutoff, Unix ms, or '' — the recoverer only takes a task whose lease ended by then
-- ARGV[9] the failure's traceback, bounded ('' = none: an earlier one is removed)
-- ARGV[10] the task's expiry, Unix ms, as the worker knows it (a handler's default), or '0':
--   then its message's own (see _expiry_lib.lua)
-- ARGV[11] most archived tasks kept (default), ARGV[12] oldest kept, ms of age (default)
-- A retry at or after the task's expiry would never start: the task is archived instead
-- (asyncq_expire, reason 'expired'), the failed run counted as for a retry.
-- Returns: 1 moved to retry (or archived as expired); 0 not active under this owner, or its
-- lease was renewed (no change).
-- The uniqueness lock is kept: the task is still queued.
-- @include _expire_lib.lua
if not asyncq_may_settle(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[8]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], 'owner')
local expires = tonumber(ARGV[10])
if not expires or expires <= 0 then
  expires = asyncq_expiry(redis.call('HGET', KEYS[1], 'msg'))
end
if expires and tonumber(ARGV[3]) >= expires then
  asyncq_set_traceback(KEYS[1], ARGV[9])
  if ARGV[6] == '1' then
    asyncq_bump(KEYS[5], KEYS[6], ARGV[7])
    asyncq_bump(KEYS[7], KEYS[8], ARGV[7])
  end
  asyncq_expire(KEYS[1], ARGV[1], 'active', 'expired: its retry at ' .. asyncq_iso_ms(ARGV[3])
    .. ' would come after its expiry at ' .. asyncq_iso_ms(expires) .. '; last error: '
    .. ARGV[4], ARGV[5])
  asyncq_expired_trim(asyncq_base(KEYS[1], 't:' .. ARGV[1]), ARGV[5], ARGV[11], ARGV[12])
  return 1
end
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'retry', 'error', ARGV[4], 'failed_at', ARGV[5])
asyncq_set_traceback(KEYS[1], ARGV[9])
if ARGV[6] == '1' then
  redis.call('HINCRBY', KEYS[1], 'retried', 1)
  asyncq_bump(KEYS[5], KEYS[6], ARGV[7])
  asyncq_bump(KEYS[7], KEYS[8], ARGV[7])
end
asyncq_event(KEYS[1], ARGV[1], 'active', 'retry', {error = ARGV[4], next = tonumber(ARGV[3])})
return 1
