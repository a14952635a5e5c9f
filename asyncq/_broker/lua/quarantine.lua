#!lua flags=allow-oom
-- quarantine: archive a task record whose id is not UTF-8 under a readable id, so it never
-- blocks its queue (a record written by another producer or by hand).
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] scheduled zset     asyncq:{q}:scheduled
-- KEYS[5] retry zset         asyncq:{q}:retry
-- KEYS[6] archived zset      asyncq:{q}:archived
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- ARGV[2] the bad id (raw bytes)
-- ARGV[3] its readable replacement id
-- ARGV[4] reason (the error stored on the archived record)
-- ARGV[5] now, Unix ms (failed_at and the archived zset score)
-- Returns: 1 archived under ARGV[3]; 0 no task hash under the bad id (only its list and set
--   entries were removed).
-- @include _lib.lua
redis.call('LREM', KEYS[1], 0, ARGV[2])
redis.call('LREM', KEYS[2], 0, ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[2])
local key = ARGV[1] .. ARGV[2]
local kind = redis.call('TYPE', key)
if kind.ok ~= 'hash' then
  return 0
end
asyncq_release_unique(redis.call('HGET', key, 'unique_key'), ARGV[2])
local new = ARGV[1] .. ARGV[3]
redis.call('RENAME', key, new)
redis.call('HDEL', new, 'owner', 'unique_key', 'traceback')
redis.call('HSET', new, 'state', 'archived', 'error', ARGV[4], 'failed_at', ARGV[5])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[3])
return 1
