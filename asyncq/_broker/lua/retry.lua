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
-- Returns: 1 moved to retry; 0 not active under this owner, or its lease was renewed (no change).
-- The uniqueness lock is kept: the task is still queued.
-- @include _lib.lua
if not asyncq_may_settle(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[8]) then
  return 0
end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], 'owner')
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
