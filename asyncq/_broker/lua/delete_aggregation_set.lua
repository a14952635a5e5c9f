-- delete_aggregation_set: the aggregated task was enqueued; drop the set and its tasks.
-- KEYS[1] set zset           asyncq:{q}:g:<group>:<set id>
-- KEYS[2] aggregation sets   asyncq:{q}:aggregation_sets
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- Returns: number of task records deleted. Uniqueness locks the tasks still own are released.
-- @include _lib.lua
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local base = asyncq_base(ARGV[1], 't:')
local listening = asyncq_listening(base)
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  if listening then
    asyncq_emit(base, id, 'aggregating', 'deleted', {reason = 'aggregated'})
  end
  local lock = redis.call('HGET', key, 'unique_key')
  if lock and redis.call('GET', lock) == id then
    redis.call('DEL', lock)
  end
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return #ids
