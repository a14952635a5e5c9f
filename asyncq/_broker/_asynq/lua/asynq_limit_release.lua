#!lua flags=allow-oom
-- asynq_limit_release: give back concurrency slots and wake one waiting task per slot freed
--   (scheduled -> pending, next in line: pushed where Go's dequeue takes the next task from,
--   pending_since set as Go's forwarder sets it), published as the event scheduled -> pending,
--   and the queue's idle asyncq workers woken (asynq_wake): asyncq's limit_release.lua over
--   asynq's layout.
-- KEYS[1] pending list       asynq:{q}:pending
-- KEYS[2] scheduled zset     asynq:{q}:scheduled
-- ARGV[1] now, Unix ns (pending_since)
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3] owner: a task holder is only released while it is not active under another asyncq
--   worker (its lease was lost and that worker took it and its slot); '' for manual holds
-- ARGV[4] wake channel       asynq:asyncq:wake (asyncq only)
-- ARGV[5] queue name (the wake-up message)
-- ARGV[6...] pairs: holder, state prefix of its limit key (<p>held, <p>wait)
-- Returns: how many waiting tasks were woken. A waiter that is no longer deferred (deleted,
--   run by hand, forwarded at its fallback time) is dropped from the line.
-- @include _asynq_lib.lua
-- @include asyncq:_limit_lib.lua
local tprefix = ARGV[2]
local base = asynq_base(KEYS[1], 'pending')
local emit = asynq_events(base)
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
  asynq_wake(base, ARGV[4], ARGV[5])
end
return woken
