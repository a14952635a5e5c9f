-- enqueue_batch: many new tasks of one queue ready now (nothing -> pending), in input order.
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] waiters flag       asyncq:{q}:waiters
-- KEYS[3] registered marker  asyncq:{q}:registered
-- KEYS[2i+2] task hash       asyncq:{q}:t:<id of task i>         (i = 1..n)
-- KEYS[2i+3] uniqueness lock asyncq:{q}:unique:... of task i  (read only when its TTL > 0)
-- ARGV[1] now, Unix ms (pending_since)
-- ARGV[2] wake channel
-- ARGV[3] queue name
-- ARGV[4i], ARGV[4i+1], ARGV[4i+2], ARGV[4i+3]: task i's id, encoded message, payload and
--   uniqueness TTL in ms (0 when not unique)
-- Returns: one code per task, as enqueue.lua: 1 enqueued (3 for the first one stored when the
--   queue must be registered, see asyncq_stored); 0 id exists; -1 unique duplicate.
-- Same checks and writes as enqueue.lua, task by task, so a batch behaves exactly like the
-- same tasks enqueued one after the other (a repeated id in the batch: the first one wins).
-- @include _store_lib.lua
-- @include _wake_lib.lua
local out = {}
local emit = asyncq_events(KEYS[1], 'pending')
local pushed = false
local n = (#KEYS - 3) / 2
for i = 1, n do
  local key, lock = KEYS[2 * i + 2], KEYS[2 * i + 3]
  local id, msg, payload = ARGV[4 * i], ARGV[4 * i + 1], ARGV[4 * i + 2]
  local code = asyncq_new_task(key, lock, id, ARGV[4 * i + 3])
  if code == 1 then
    redis.call('HSET', key, 'msg', msg, 'payload', payload, 'state', 'pending',
      'pending_since', ARGV[1])
    redis.call('LPUSH', KEYS[1], id)
    pushed = true
    emit(id, '', 'pending')
    code = asyncq_stored(KEYS[3])
  end
  out[i] = code
end
if pushed then
  asyncq_wake(KEYS[2], ARGV[2], ARGV[3])
end
return out
