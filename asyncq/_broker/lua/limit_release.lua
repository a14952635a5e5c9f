#!lua flags=allow-oom
-- limit_release: give back concurrency slots and wake one waiting task per slot freed
-- (scheduled -> pending, next in line).
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] scheduled zset     asyncq:{q}:scheduled
-- KEYS[3] waiters flag       asyncq:{q}:waiters
-- ARGV[1] now, Unix ms (pending_since)
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] owner: a task holder is only released while it is not active under another worker
--   (its lease was lost and it runs elsewhere now); '' for manual holds
-- ARGV[4] wake channel
-- ARGV[5] queue name
-- ARGV[6...] pairs: holder, state prefix of its limit key (<p>held, <p>wait)
-- Returns: how many waiting tasks were woken. A waiter that is no longer deferred (deleted,
--   run by hand, forwarded at its fallback time) is dropped from the line.
-- @include _wake_lib.lua
-- @include _limit_lib.lua
local tprefix = ARGV[2]
local emit = asyncq_events(KEYS[1], 'pending')
local woken = 0
for i = 6, #ARGV, 2 do
  local holder, state = ARGV[i], ARGV[i + 1]
  local mine = true
  if ARGV[3] ~= '' then
    local v = redis.call('HMGET', tprefix .. holder, 'state', 'owner')
    mine = not (v[1] == 'active' and v[2] and v[2] ~= ARGV[3])
  end
  if mine and redis.call('ZREM', state .. 'held', holder) == 1 then
    local id = asyncq_limit_wake_next(state, KEYS[2], KEYS[1], tprefix, ARGV[1], 50)
    if id then
      emit(id, 'scheduled', 'pending')
      woken = woken + 1
    end
  end
end
if woken > 0 then
  asyncq_wake(KEYS[3], ARGV[4], ARGV[5])
end
return woken
