-- add_to_group: a new task waiting to be aggregated with its group (nothing -> aggregating).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] group zset         asyncq:{q}:g:<group>
-- KEYS[3] groups set         asyncq:{q}:groups
-- KEYS[4] uniqueness lock    asyncq:{q}:unique:...  (read only when ARGV[5] > 0)
-- KEYS[5] registered marker  asyncq:{q}:registered
-- ARGV[1] task id
-- ARGV[2] encoded message (JSON)
-- ARGV[3] payload bytes
-- ARGV[4] now, Unix ms (the group zset score)
-- ARGV[5] uniqueness TTL in ms, 0 when the task is not unique
-- ARGV[6] group name
-- Returns: 1 added (3: and the queue must be registered, see asyncq_stored); 0 a task with
--   this id exists; -1 a unique duplicate holds the lock.
-- @include _store_lib.lua
local code = asyncq_new_task(KEYS[1], KEYS[4], ARGV[1], ARGV[5])
if code ~= 1 then
  return code
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'payload', ARGV[3], 'state', 'aggregating',
  'group', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[6])
asyncq_event(KEYS[1], ARGV[1], '', 'aggregating', {group = ARGV[6]})
return asyncq_stored(KEYS[5])
