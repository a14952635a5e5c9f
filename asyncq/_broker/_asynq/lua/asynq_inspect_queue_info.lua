-- asynq_inspect_queue_info: sizes and counters of one queue, as Go's Inspector reads them
--   (CurrentStats), in one atomic step (read only).
-- KEYS[1] pending list       KEYS[2] active list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] paused flag        asynq:{q}:paused
-- KEYS[8] processed total    KEYS[9] failed total
-- KEYS[10] processed today   KEYS[11] failed today   (asynq:{q}:processed|failed:<date>)
-- KEYS[12] groups set        asynq:{q}:groups
-- KEYS[13] lease zset        asynq:{q}:lease
-- ARGV[1] task key prefix    asynq:{q}:t:
-- ARGV[2] group key prefix   asynq:{q}:g:
-- ARGV[3] now, Unix s (leases whose score is at or before it count as expired)
-- Returns: {pending, active, scheduled, retry, archived, completed, aggregating, groups,
--   processed today, failed today, processed total, failed total, paused (0/1),
--   pending_since of the oldest pending task (Unix ns as stored, '0' when none or unset),
--   expired leases}. Aggregating counts the tasks of the groups in the groups set, as Go.
local out = {
  redis.call('LLEN', KEYS[1]), redis.call('LLEN', KEYS[2]),
  redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4]),
  redis.call('ZCARD', KEYS[5]), redis.call('ZCARD', KEYS[6]),
}
local groups = redis.call('SMEMBERS', KEYS[12])
local aggregating = 0
for _, g in ipairs(groups) do
  aggregating = aggregating + redis.call('ZCARD', ARGV[2] .. g)
end
out[#out + 1] = aggregating
out[#out + 1] = #groups
for _, key in ipairs({KEYS[10], KEYS[11], KEYS[8], KEYS[9]}) do
  out[#out + 1] = redis.call('GET', key) or '0'
end
out[#out + 1] = redis.call('EXISTS', KEYS[7])
local since = '0'
if out[1] > 0 then
  local oldest = redis.call('LINDEX', KEYS[1], -1)
  since = redis.call('HGET', ARGV[1] .. oldest, 'pending_since') or '0'
end
out[#out + 1] = since
out[#out + 1] = redis.call('ZCOUNT', KEYS[13], '-inf', ARGV[3])
return out
