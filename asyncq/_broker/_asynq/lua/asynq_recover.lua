#!lua flags=allow-oom
-- asynq_recover: retry or archive a task whose lease ended (its worker died or hung), as Go's
--   recoverer does with Retry or Archive: active -> retry (retried + 1 when a failure) or
--   archived (trimmed as Go trims it), error_msg and last_failed_at set, counters counted.
--   Only while the task is still active with a lease score at or before the cutoff that
--   applies to it (see asynq_list_lease_expired): a lease renewed meanwhile wins.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] retry zset         asynq:{q}:retry
-- KEYS[5] archived zset      asynq:{q}:archived
-- KEYS[6] processed today    KEYS[7] failed today   (asynq:{q}:processed|failed:<date>)
-- KEYS[8] processed total    KEYS[9] failed total   (asynq:{q}:processed|failed)
-- ARGV[1] task id
-- ARGV[2] 'retry' or 'archive'
-- ARGV[3] asyncq cutoff, Unix s (a run an asyncq worker holds)
-- ARGV[4] Go cutoff, Unix s (any other run)
-- ARGV[5] when to run it again, Unix s (retry)
-- ARGV[6] error text
-- ARGV[7] now, Unix s
-- ARGV[8] '1' a failure (retry: counted, retried + 1), '0' not one
-- ARGV[9] daily counter expiry, Unix s
-- ARGV[10] archive age cutoff, Unix s (archived at or before it: deleted)
-- ARGV[11] archive max size (Go: 10000)
-- ARGV[12] task key prefix   asynq:{q}:t:
-- ARGV[13] traceback ('' none), kept in the field Go ignores
-- ARGV[14] the error as Go reads it (error_msg: ARGV[6] without its exception type)
-- Returns: 1 recovered, 0 not (no longer active, or its lease was renewed: nothing written).
-- @include _asynq_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'lease_until', 'msg')
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if v[1] ~= 'active' or not score or not v[4] then
  return 0
end
score = tonumber(score)
local held = v[2] and v[3] and tonumber(v[3]) == score
if score > tonumber(held and ARGV[3] or ARGV[4]) then
  return 0
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local now = tonumber(ARGV[7])
local set = {[ASYNQ_LAST_FAILED_AT] = now}
if ARGV[2] == 'retry' then
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
  if ARGV[8] == '1' then
    set[ASYNQ_RETRIED] = asynq_pb_get(v[4], ASYNQ_RETRIED) + 1
  end
  asynq_write_failure(KEYS[1], v[4], set, 'retry', ARGV[6], ARGV[14], ARGV[13])
  if ARGV[8] == '1' then
    asynq_count(KEYS[6], KEYS[8], ARGV[9])
    asynq_count(KEYS[7], KEYS[9], ARGV[9])
  end
  return 1
end
redis.call('ZADD', KEYS[5], now, ARGV[1])
local old = redis.call('ZRANGE', KEYS[5], '-inf', ARGV[10], 'BYSCORE')
for _, id in ipairs(old) do
  redis.call('DEL', ARGV[12] .. id)
  redis.call('ZREM', KEYS[5], id)
end
local extra = redis.call('ZRANGE', KEYS[5], 0, -tonumber(ARGV[11]))
for _, id in ipairs(extra) do
  redis.call('DEL', ARGV[12] .. id)
  redis.call('ZREM', KEYS[5], id)
end
if redis.call('ZSCORE', KEYS[5], ARGV[1]) then
  asynq_write_failure(KEYS[1], v[4], set, 'archived', ARGV[6], ARGV[14], ARGV[13])
end
asynq_count(KEYS[6], KEYS[8], ARGV[9])
asynq_count(KEYS[7], KEYS[9], ARGV[9])
return 1
