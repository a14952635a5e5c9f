-- The body of return_aggregation_set, for both layouts (it builds no key name and reads no clock):
-- return_aggregation_set.lua (asyncq's) and asynq_return_aggregation_set.lua (Go asynq's)
-- document its KEYS, ARGV and reply.
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
