-- return_aggregation_set: give the tasks of one aggregation set back to their group now (the
-- group's aggregator failed), so they stay listed and are tried again (set -> group).
-- KEYS[1] aggregation set    asyncq:{q}:g:<group>:<set id>
-- KEYS[2] group zset         asyncq:{q}:g:<group>
-- KEYS[3] groups set         asyncq:{q}:groups
-- KEYS[4] aggregation sets   asyncq:{q}:aggregation_sets
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
