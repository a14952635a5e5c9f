#!lua flags=allow-oom
-- limit_set: set or clear a value given to a limit at run time (a queue's concurrency cap, or
-- a value replacing a handler limit's declared one), then wake the waiting tasks it lets start
-- now (scheduled -> pending, first in line first): as many as the slots a raised or cleared
-- concurrency size frees, and every waiter of a rate (each claims its token again: the pace
-- starts again at the new rate, its window of starts is kept). A lowered size stops nothing
-- that runs: it applies to the next start, which limit_acquire checks against the value read
-- in the same step.
-- KEYS[1] limit registry     asyncq:{q}:limits  (the run-time value is its field 'o:' ..
--   ARGV[6], beside the declared one in ARGV[6])
-- KEYS[2] lease zset         asyncq:{q}:lease
-- KEYS[3] pending list       asyncq:{q}:pending
-- KEYS[4] scheduled zset     asyncq:{q}:scheduled
-- KEYS[5] waiters flag       asyncq:{q}:waiters
-- ARGV[1] now, Unix ms, by the caller's clock (lease ends are compared with it; pending_since)
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] wake channel
-- ARGV[4] queue name
-- ARGV[5] kind: 'q' (the queue's cap), 'c' (a concurrency limit) or 'r' (a rate)
-- ARGV[6] registry field of the limit: 'q:', 'c:<name>' or 'r:<name>'
-- ARGV[7] the value: 'n' (queue cap, concurrency) or 'n/period_ms/burst' (rate); '' clears it
--   (the declared value applies again; a queue without a cap has no limit)
-- ARGV[8...] the state prefixes of the limit's keys (<p>held, <p>wait), one per key value
--   it was used with when the caller read its key set
-- Returns: {the previous run-time value or '', the declared value or '', tasks woken}
-- @include _wake_lib.lua
-- @include _limit_lib.lua
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
local emit = asyncq_events(KEYS[3], 'pending')
local woken = 0

-- Live holders of a key: those whose lease (task) or hold (manual, 'm:<id>') has not ended.
local function live(held)
  local members = redis.call('ZRANGE', held, 0, -1, 'WITHSCORES')
  local c = 0
  for j = 1, #members, 2 do
    local e
    if string.sub(members[j], 1, 2) == 'm:' then
      e = tonumber(members[j + 1])
    else
      e = tonumber(redis.call('ZSCORE', KEYS[2], members[j]) or '-1')
    end
    if e >= now then
      c = c + 1
    end
  end
  return c
end

for k = 8, #ARGV do
  local state = ARGV[k]
  local room = 10000  -- no size in force, or a rate: every waiter claims again (at most this)
  if n then
    room = n - live(state .. 'held')
  elseif ARGV[5] == 'r' then
    redis.call('DEL', state .. 'tat')  -- the pace starts again at the new rate
  end
  while room > 0 do
    local id = asyncq_limit_wake_next(state, KEYS[4], KEYS[3], tprefix, ARGV[1])
    if not id then
      break
    end
    emit(id, 'scheduled', 'pending')
    woken = woken + 1
    room = room - 1
  end
end
if woken > 0 then
  asyncq_wake(KEYS[5], ARGV[3], ARGV[4])
end
return {previous, declared, woken}
