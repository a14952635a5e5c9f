-- delete_aggregation_set: the aggregated task was enqueued; drop the set and its tasks.
-- KEYS[1] set zset           asyncq:{q}:g:<group>:<set id>
-- KEYS[2] aggregation sets   asyncq:{q}:aggregation_sets
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- Returns: number of task records deleted. Uniqueness locks the tasks still own are released.
-- @include _lib.lua
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local emit = asyncq_events(ARGV[1], 't:')
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  emit(id, 'aggregating', 'deleted', {reason = 'aggregated'})
  asyncq_release_unique(redis.call('HGET', key, 'unique_key'), id)
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return #ids
