#!lua flags=allow-oom
-- asynq_limit_set: set or clear a value given to a limit at run time (a queue's concurrency
--   cap, or a value replacing a handler limit's declared one), then wake the waiting tasks it
--   lets start now (scheduled -> pending, first in line first; pushed where Go's dequeue takes
--   the next task from, pending_since in ns as Go's forwarder sets it): as many as the slots
--   a raised or cleared concurrency size frees, and every waiter of a rate (the pace starts
--   again at the new rate, its window of starts is kept). asyncq's
--   limit_set.lua over asynq's layout, whose leases are scored in Unix seconds. Go's servers
--   ignore the registry: only asyncq workers keep the values.
-- KEYS[1] limit registry     asynq:{q}:asyncq:limits  (the run-time value is its field 'o:' ..
--   ARGV[6], beside the declared one in ARGV[6])
-- KEYS[2] lease zset         asynq:{q}:lease  (task id -> lease end, Unix s)
-- KEYS[3] pending list       asynq:{q}:pending
-- KEYS[4] scheduled zset     asynq:{q}:scheduled
-- ARGV[1] now, Unix ms, by the caller's clock (lease ends are compared with it)
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3] wake channel       asynq:asyncq:wake (asyncq only)
-- ARGV[4] queue name (the wake-up message)
-- ARGV[5] kind: 'q' (the queue's cap), 'c' (a concurrency limit) or 'r' (a rate)
-- ARGV[6] registry field of the limit: 'q:', 'c:<name>' or 'r:<name>'
-- ARGV[7] the value: 'n' (queue cap, concurrency) or 'n/period_ms/burst' (rate); '' clears it
-- ARGV[8] now, Unix ns (pending_since)
-- ARGV[9...] the state prefixes of the limit's keys (<p>held, <p>wait)
-- Returns: {the previous run-time value or '', the declared value or '', tasks woken}
-- @include _asynq_lib.lua
-- @include asyncq:_limit_lib.lua
local field = 'o:' .. ARGV[6]
local previous = redis.call('HGET', KEYS[1], field) or ''
local declared = redis.call('HGET', KEYS[1], ARGV[6]) or ''
if ARGV[7] == '' then
  redis.call('HDEL', KEYS[1], field)
else
  redis.call('HSET', KEYS[1], field, ARGV[7])
end
local value = ARGV[7] ~= '' and ARGV[7] or declared
local n = nil  -- the concurrency size in force now; nil: no limit, or a rate
if ARGV[5] ~= 'r' and value ~= '' then
  n = tonumber(string.match(value, '^(%d+)'))
end
local now = tonumber(ARGV[1])
local tprefix = ARGV[2]
local base = asynq_base(KEYS[3], 'pending')
local emit = asynq_events(base)
local woken = 0

-- Live holders of a key: a manual hold ('m:<id>') until its end, a task until the whole second
-- its lease is scored at has passed.
local function live(held)
  local members = redis.call('ZRANGE', held, 0, -1, 'WITHSCORES')
  local c = 0
  for j = 1, #members, 2 do
    local e
    if string.sub(members[j], 1, 2) == 'm:' then
      e = tonumber(members[j + 1])
    else
      local lease = redis.call('ZSCORE', KEYS[2], members[j])
      e = lease and tonumber(lease) * 1000 + 999 or -1
    end
    if e >= now then
      c = c + 1
    end
  end
  return c
end

for k = 9, #ARGV do
  local state = ARGV[k]
  local room = 10000  -- no size in force, or a rate: every waiter claims again (at most this)
  if n then
    room = n - live(state .. 'held')
  elseif ARGV[5] == 'r' then
    redis.call('DEL', state .. 'tat')  -- the pace starts again at the new rate
  end
  while room > 0 do
    local id = asyncq_limit_wake_next(state, KEYS[4], KEYS[3], tprefix, ARGV[8])
    if not id then
      break
    end
    emit(id, 'scheduled', 'pending')
    woken = woken + 1
    room = room - 1
  end
end
if woken > 0 then
  asynq_wake(base, ARGV[3], ARGV[4])
end
return {previous, declared, woken}
