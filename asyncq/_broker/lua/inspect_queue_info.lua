-- inspect_queue_info: sizes and counters of one queue, read in one atomic step (read only).
-- KEYS[1] pending list       KEYS[2] active list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] paused flag        asyncq:{q}:paused
-- KEYS[8] processed total    KEYS[9] failed total
-- KEYS[10] processed today   KEYS[11] failed today
-- KEYS[12] groups set        asyncq:{q}:groups
-- KEYS[13] aggregation sets  asyncq:{q}:aggregation_sets
-- KEYS[14] lease zset        asyncq:{q}:lease
-- KEYS[15] expired total     asyncq:{q}:expired (tasks archived unrun: they expired)
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] now, Unix ms (leases that ended by then count as expired)
-- Returns: {pending, active, scheduled, retry, archived, completed, aggregating, groups,
--   processed today, failed today, processed total, failed total, paused (0/1),
--   pending_since of the oldest pending task (Unix ms, 0 if none), expired leases, expired
--   tasks total}.
-- Aggregating counts the tasks of every group plus those staged in aggregation sets.
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
for _, set_key in ipairs(redis.call('ZRANGE', KEYS[13], 0, -1)) do
  aggregating = aggregating + redis.call('ZCARD', set_key)
end
out[7] = aggregating
out[8] = #groups
out[9] = tonumber(redis.call('GET', KEYS[10]) or '0')
out[10] = tonumber(redis.call('GET', KEYS[11]) or '0')
out[11] = tonumber(redis.call('GET', KEYS[8]) or '0')
out[12] = tonumber(redis.call('GET', KEYS[9]) or '0')
out[13] = redis.call('EXISTS', KEYS[7])
local oldest = redis.call('LINDEX', KEYS[1], -1)
out[14] = 0
if oldest then
  out[14] = tonumber(redis.call('HGET', ARGV[1] .. oldest, 'pending_since') or '0')
end
out[15] = redis.call('ZCOUNT', KEYS[14], '-inf', ARGV[3])
out[16] = tonumber(redis.call('GET', KEYS[15]) or '0')
return out
