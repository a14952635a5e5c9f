-- workflow_store: the steps of a new workflow in one queue: ready ones pending (nothing ->
-- pending), the others waiting for the steps before them (nothing -> waiting).
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] waiters flag       asyncq:{q}:waiters
-- KEYS[3] registered marker  asyncq:{q}:registered
-- KEYS[i+3] task hash        asyncq:{q}:t:<id of step i>   (i = 1..n)
-- ARGV[1] now, Unix ms (pending_since)
-- ARGV[2] wake channel
-- ARGV[3] queue name
-- ARGV[5i-1..5i+3]: step i's id, encoded message, payload, workflow token
--   ('<workflow id>#<node>', the task's 'wf' field) and how it takes its input when released
--   ('' none, 'r' as its payload, else the JSON name of the argument that gets it), or '!'
--   in place of that mode when it is pending at once.
-- Returns: one code per step: 1 stored (3: and the queue must be registered, see
--   asyncq_stored); 0 a task with this id exists (nothing written for it).
-- @include _store_lib.lua
-- @include _wake_lib.lua
local out = {}
local emit = asyncq_events(KEYS[1], 'pending')
local pushed = false
for i = 1, #KEYS - 3 do
  local key = KEYS[i + 3]
  local at = 5 * i - 1
  local id, mode = ARGV[at], ARGV[at + 4]
  if redis.call('EXISTS', key) == 1 then
    out[i] = 0
  else
    redis.call('HSET', key, 'msg', ARGV[at + 1], 'payload', ARGV[at + 2], 'wf', ARGV[at + 3])
    if mode == '!' then
      redis.call('HSET', key, 'state', 'pending', 'pending_since', ARGV[1])
      redis.call('LPUSH', KEYS[1], id)
      pushed = true
      emit(id, '', 'pending')
    else
      redis.call('HSET', key, 'state', 'waiting', 'wfin', mode)
      emit(id, '', 'waiting')
    end
    out[i] = asyncq_stored(KEYS[3])
  end
end
if pushed then
  asyncq_wake(KEYS[2], ARGV[2], ARGV[3])
end
return out
