-- delete_expired_completed: drop completed tasks whose retention ended (completed -> deleted),
-- and completion marks older than a minute (see done.lua).
-- KEYS[1] completed zset     asyncq:{q}:completed
-- KEYS[2] completion marks   asyncq:{q}:marks
-- ARGV[1] now, Unix ms
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] most tasks to delete
-- ARGV[4] marks completed up to this time (Unix ms) are dropped, at most ARGV[3] of them
-- Returns: number deleted.
-- @include _lib.lua
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local emit = asyncq_events(KEYS[1], 'completed')
for _, id in ipairs(ids) do
  emit(id, 'completed', 'deleted')
  redis.call('DEL', ARGV[2] .. id)
  redis.call('ZREM', KEYS[1], id)
end
local marks = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[4], 'BYSCORE', 'LIMIT', 0,
                        tonumber(ARGV[3]))
if #marks > 0 then
  redis.call('ZREM', KEYS[2], unpack(marks))
end
return #ids
