-- asynq_return_aggregation_set: give the tasks of one aggregation set back to their group now
--   (the group's aggregator failed), with their scores, so they are listed and tried again
--   (set -> group). Go has no such step: it leaves the set to be reclaimed after its deadline.
-- KEYS[1] aggregation set    asynq:{q}:g:<group>:<set id>
-- KEYS[2] group zset         asynq:{q}:g:<group>
-- KEYS[3] groups set         asynq:{q}:groups
-- KEYS[4] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] group name
-- Returns: number of tasks returned.
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  redis.call('ZADD', KEYS[2], members[i + 1], members[i])
end
if #members > 0 then
  redis.call('SADD', KEYS[3], ARGV[1])
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], KEYS[1])
return #members / 2
