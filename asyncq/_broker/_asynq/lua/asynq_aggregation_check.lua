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

-- Stage every task taken (`members`: id, score...) in the new set; returns how many.
local function aggregation_stage(members, now)
  for i = 1, #members, 2 do
    redis.call('ZADD', KEYS[2], members[i + 1], members[i])
  end
  return #members / 2
end
-- @include asyncq:_aggregation_check_body.lua
