#!lua flags=allow-oom
-- asynq_inspect_recover: an operator sends back a running task whose lease ended or whose
--   worker is gone (active -> retry, or -> archived when its retries are used up), written as
--   Go's Retry (a failure: retried + 1) and Archive (then trimmed by Go's caps) write them.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] retry zset         KEYS[5] archived zset
-- KEYS[6] processed today    KEYS[7] failed today
-- KEYS[8] processed total    KEYS[9] failed total
-- ARGV[1] task id
-- ARGV[2] 'retry' or 'archive'
-- ARGV[3] owner: only if this asyncq worker still holds it ('' whoever holds it)
-- ARGV[4] lease cutoff, Unix s: only if its lease ended by then, or it has none ('' any lease)
-- ARGV[5] retry: when to run it again, Unix s
-- ARGV[6] error text
-- ARGV[7] now, Unix s (last_failed_at; the archived score)
-- ARGV[8] daily counter expiry, Unix s
-- ARGV[9] archive age cutoff, Unix s     ARGV[10] archive max size
-- ARGV[11] task key prefix   asynq:{q}:t:
-- ARGV[12] traceback ('' none)
-- ARGV[13] the error as Go reads it (error_msg: ARGV[6] without its exception type)
-- Returns: 1 written; 0 the task is not active, or no longer held by that owner, or its lease
--   was renewed past the cutoff (nothing written).
-- @include _asynq_inspect_lib.lua
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then
  return 0
end
if ARGV[3] ~= '' and not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[3]) then
  return 0
end
if ARGV[4] ~= '' then
  local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if score and tonumber(score) > tonumber(ARGV[4]) then
    return 0
  end
end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local msg = redis.call('HGET', KEYS[1], 'msg') or ''
local set = {[ASYNQ_LAST_FAILED_AT] = tonumber(ARGV[7])}
if ARGV[2] == 'retry' then
  set[ASYNQ_RETRIED] = asynq_pb_get(msg, ASYNQ_RETRIED) + 1
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
else
  redis.call('ZADD', KEYS[5], ARGV[7], ARGV[1])
end
asynq_write_failure(KEYS[1], msg, set, ARGV[2] == 'retry' and 'retry' or 'archived', ARGV[6],
  ARGV[13], ARGV[12])
if ARGV[2] ~= 'retry' then
  asynq_inspect_trim(KEYS[5], ARGV[11], ARGV[9], tonumber(ARGV[10]), 1000)
end
asynq_count(KEYS[6], KEYS[8], ARGV[8])
asynq_count(KEYS[7], KEYS[9], ARGV[8])
return 1
