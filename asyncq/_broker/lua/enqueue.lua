-- enqueue: a new task ready now (nothing -> pending).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] uniqueness lock    asyncq:{q}:unique:...  (read only when ARGV[5] > 0)
-- KEYS[4] waiters flag       asyncq:{q}:waiters (the idle workers asyncq:{q}:idle, their
--   channels and hand-off records are derived from it: see asyncq_handoff in _wake_lib.lua)
-- KEYS[5] registered marker  asyncq:{q}:registered
-- ARGV[1] task id
-- ARGV[2] encoded message (JSON)
-- ARGV[3] payload bytes
-- ARGV[4] now, Unix ms (becomes pending_since)
-- ARGV[5] uniqueness TTL in ms, 0 when the task is not unique
-- ARGV[6] wake channel
-- ARGV[7] queue name
-- Returns: 1 enqueued (3: and the queue must be added to the registry, see asyncq_stored);
--   0 a task with this id exists; -1 a unique duplicate holds the lock.
-- @include _store_lib.lua
-- @include _wake_lib.lua
local code = asyncq_new_task(KEYS[1], KEYS[3], ARGV[1], ARGV[5])
if code ~= 1 then
  return code
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'payload', ARGV[3], 'state', 'pending',
  'pending_since', ARGV[4])
redis.call('LPUSH', KEYS[2], ARGV[1])
asyncq_event(KEYS[1], ARGV[1], '', 'pending')
asyncq_wake(KEYS[4], ARGV[6], ARGV[7])
return asyncq_stored(KEYS[5])
