-- asynq_aggregation_check: stage a group's tasks for aggregation when it is ready (group ->
--   aggregation set), as Go's AggregationCheck: ready when it holds max size tasks, when its
--   oldest task waited max delay, or when its newest waited the grace period; a set takes at
--   most max size tasks, the oldest first; the group leaves the groups set once empty.
-- KEYS[1] group zset         asynq:{q}:g:<group>
-- KEYS[2] new set zset       asynq:{q}:g:<group>:<set id>
-- KEYS[3] aggregation sets   asynq:{q}:aggregation_sets
-- KEYS[4] groups set         asynq:{q}:groups
-- ARGV[1] now, Unix s
-- ARGV[2] grace period, s
-- ARGV[3] max delay, s (0: none)
-- ARGV[4] max size (0: none)
-- ARGV[5] set deadline, Unix s (after it the set returns to its group)
-- ARGV[6] group name
-- Returns: number of tasks moved into the new set (0: not ready, nothing changed).
local size = redis.call('ZCARD', KEYS[1])
if size == 0 then
  redis.call('SREM', KEYS[4], ARGV[6])
  return 0
end
local now = tonumber(ARGV[1])
local max_size = tonumber(ARGV[4])
local max_delay = tonumber(ARGV[3])
local ready = max_size > 0 and size >= max_size
if not ready and max_delay > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  ready = tonumber(oldest[2]) <= now - max_delay
end
if not ready then
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  ready = tonumber(newest[2]) <= now - tonumber(ARGV[2])
end
if not ready then
  return 0
end
local take = size
if max_size > 0 and take > max_size then
  take = max_size
end
local members = redis.call('ZRANGE', KEYS[1], 0, take - 1, 'WITHSCORES')
for i = 1, #members, 2 do
  redis.call('ZADD', KEYS[2], members[i + 1], members[i])
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, take - 1)
redis.call('ZADD', KEYS[3], ARGV[5], KEYS[2])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[4], ARGV[6])
end
return take
