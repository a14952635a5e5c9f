-- asynq_delete_aggregation_set: the aggregated task was enqueued; drop the set and its tasks,
--   as Go's DeleteAggregationSet; also releases the uniqueness locks the tasks still hold
--   (Go leaves them to expire).
-- KEYS[1] set zset           asynq:{q}:g:<group>:<set id>
-- KEYS[2] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] task key prefix    asynq:{q}:t:
-- Returns: number of tasks in the set.
-- @include _asynq_lib.lua
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  if redis.call('TYPE', key)['ok'] == 'hash' then
    asynq_release_lock(key, id)
  end
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return #ids
