-- asynq_schedule: store a task to run later (none -> scheduled), as Go's Schedule(Unique).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] scheduled zset     asynq:{q}:scheduled
-- KEYS[3] uniqueness lock    (an unused name when not unique)
-- ARGV[1] task id
-- ARGV[2] TaskMessage (protobuf)
-- ARGV[3] asyncq's message (JSON)
-- ARGV[4] when to run it, Unix s (the score)
-- ARGV[5] lock TTL, ms; 0 when the task is not unique
-- ARGV[6] group name, or '': unlike Go's Schedule, the hash gets its `group` field, so the
--   forwarder (Go's or asyncq's) moves it into its group when due rather than to pending
-- Returns: 1 stored, 0 a task with this id exists, -1 the lock is held. Publishes the event
--   none -> scheduled when somebody listens (asyncq only).
-- @include _asynq_lib.lua
local unique = tonumber(ARGV[5]) > 0
if unique and not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[5]) then
  return -1
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'state', 'scheduled', 'asyncq_msg', ARGV[3])
if unique then
  redis.call('HSET', KEYS[1], 'unique_key', KEYS[3])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'group', ARGV[6])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
asynq_events(asynq_base(KEYS[2], 'scheduled'))(ARGV[1], '', 'scheduled',
  {next = tonumber(ARGV[4]) * 1000})
return 1
