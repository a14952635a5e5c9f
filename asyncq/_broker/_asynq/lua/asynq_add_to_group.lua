-- asynq_add_to_group: store a task in its group (none -> aggregating), as Go's AddToGroup.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] group zset         asynq:{q}:g:<group>
-- KEYS[3] groups set         asynq:{q}:groups
-- KEYS[4] uniqueness lock    (an unused name when not unique)
-- ARGV[1] task id
-- ARGV[2] TaskMessage (protobuf)
-- ARGV[3] asyncq's message (JSON)
-- ARGV[4] now, Unix s (its score in the group)
-- ARGV[5] lock TTL, ms; 0 when the task is not unique
-- ARGV[6] group name
-- Returns: 1 stored, 0 a task with this id exists, -1 the lock is held. Publishes the event
--   none -> aggregating when somebody listens (asyncq only).
-- @include _asynq_lib.lua
local unique = tonumber(ARGV[5]) > 0
if unique and not redis.call('SET', KEYS[4], ARGV[1], 'NX', 'PX', ARGV[5]) then
  return -1
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'state', 'aggregating', 'group', ARGV[6],
  'asyncq_msg', ARGV[3])
if unique then
  redis.call('HSET', KEYS[1], 'unique_key', KEYS[4])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[6])
asynq_events(asynq_base(KEYS[3], 'groups'))(ARGV[1], '', 'aggregating', {group = ARGV[6]})
return 1
