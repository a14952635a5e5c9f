-- The body of aggregation_check, for both layouts: aggregation_check.lua (asyncq's) and
-- asynq_aggregation_check.lua (Go asynq's) document its KEYS, ARGV and reply, and define
-- before including it how the tasks taken are staged (aggregation_stage: into KEYS[2], with
-- their scores; returns how many were). The group is ready when it holds max size tasks, when
-- its oldest task waited max delay, or when its newest waited the grace period; a set takes at
-- most max size tasks, the oldest first; the group leaves the groups set once empty.
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
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, take - 1)
local staged = aggregation_stage(members, now)
if staged > 0 then
  redis.call('ZADD', KEYS[3], ARGV[5], KEYS[2])
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[4], ARGV[6])
end
return staged
