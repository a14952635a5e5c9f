-- asynq_enqueue: store a task ready now (none -> pending), as Go's Enqueue/EnqueueUnique.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] uniqueness lock    asynq:{q}:unique:<type>:<md5> (an unused name when not unique)
-- ARGV[1] task id
-- ARGV[2] TaskMessage (protobuf)
-- ARGV[3] asyncq's message (JSON), kept in the field asyncq_msg Go ignores
-- ARGV[4] now, Unix ns (pending_since)
-- ARGV[5] lock TTL, ms; 0 when the task is not unique
-- ARGV[6] wake channel       asynq:asyncq:wake (asyncq only)
-- ARGV[7] queue name (the wake-up message)
-- Returns: 1 stored, 0 a task with this id exists, -1 the lock is held (nothing stored). As
--   in Go, the lock is taken before the id is checked, and stays taken on a conflict.
-- asyncq's additions (Go's enqueue does neither): the event none -> pending when somebody
--   listens, then the queue's next task is handed to an idle asyncq worker in one hop, or the
--   idle workers are woken (asynq_wake).
-- @include _asynq_lib.lua
local unique = tonumber(ARGV[5]) > 0
if unique and not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[5]) then
  return -1
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'state', 'pending', 'pending_since', ARGV[4],
  'asyncq_msg', ARGV[3])
if unique then
  redis.call('HSET', KEYS[1], 'unique_key', KEYS[3])
end
redis.call('LPUSH', KEYS[2], ARGV[1])
local base = asynq_base(KEYS[2], 'pending')
asynq_events(base)(ARGV[1], '', 'pending')
asynq_wake(base, ARGV[6], ARGV[7])
return 1
