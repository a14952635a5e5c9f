-- delete_expired_completed: drop completed tasks whose retention ended (completed -> deleted).
-- KEYS[1] completed zset     asyncq:{q}:completed
-- ARGV[1] now, Unix ms
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] most tasks to delete
-- Returns: number deleted.
-- @include _lib.lua
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local emit = asyncq_events(KEYS[1], 'completed')
for _, id in ipairs(ids) do
  emit(id, 'completed', 'deleted')
  redis.call('DEL', ARGV[2] .. id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids
