-- asynq_inspect_backlog: what a queue still holds for a worker to run, now or soon (read
--   only; a worker's burst mode asks).
-- KEYS[1] pending list       asynq:{q}:pending
-- KEYS[2] scheduled zset     KEYS[3] retry zset
-- KEYS[4] groups set         asynq:{q}:groups
-- KEYS[5] paused flag        asynq:{q}:paused
-- ARGV[1] horizon, Unix s: scheduled/retry tasks due by then count as due
-- Returns: {pending, due, groups, paused} where groups is the number of groups holding tasks
--   and paused is 1 when the queue is paused, else 0.
local due = redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[1])
  + redis.call('ZCOUNT', KEYS[3], '-inf', ARGV[1])
return {redis.call('LLEN', KEYS[1]), due, redis.call('SCARD', KEYS[4]),
        redis.call('EXISTS', KEYS[5])}
