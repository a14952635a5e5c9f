-- One-hop pickup's shared steps, included by _wake_lib.lua and, with the shared-include prefix,
-- by Go asynq's _asynq_lib.lua: how a task is offered to a queue's idle workers and how the
-- rest wake them. It builds no key name (each layout passes its keys) and reads no clock.

-- The task a hand-off would give now, the pending list `pending`'s right end (where the next
-- dequeue takes from): its id, hash key (`tprefix` .. id) and the values of its hash's fields
-- `...` (the first one its message). Nil when none may be handed off: the queue paused
-- (`paused` exists) or capped (`limits` holds 'o:q:': a task must claim a slot first, which
-- the worker does for what a dequeue returns), nothing pending, or no usable record (left to
-- a dequeue, which drops or archives it). The caller has checked that a worker is idle (most
-- calls end there, before any key name is built).
local function handoff_candidate(paused, limits, pending, tprefix, ...)
  if redis.call('EXISTS', paused) == 1 or redis.call('HEXISTS', limits, 'o:q:') == 1 then
    return nil
  end
  local id = redis.call('LINDEX', pending, -1)
  if not id then
    return nil
  end
  local key = tprefix .. id
  local v = redis.pcall('HMGET', key, ...)
  if v.err or not v[1] then
    return nil
  end
  return id, key, v
end

-- Offer a task to the idle workers registered in `idle` (ZSET '<lease ms>:<owner>' -> when
-- the registration lapses, Unix ms), the longest idle first, dropping those lapsed by `now`
-- and each one tried: `offer(lease_ms, owner)` returns true once that worker took it. Returns
-- whether one did.
local function handoff_offer(idle, now, offer)
  redis.call('ZREMRANGEBYSCORE', idle, '-inf', now)
  while true do
    local who = redis.call('ZPOPMIN', idle)
    if #who == 0 then
      return false
    end
    local lease_ms, owner = string.match(who[1], '^(%d+):(.+)$')
    if lease_ms and offer(lease_ms, owner) then
      return true
    end
  end
end

-- Tasks became pending: `handoff(where)` hands the next one to an idle worker until it
-- returns false; if some are still pending (`pending` exists), the idle workers that left the flag
-- `waiters` are woken by publishing `queue` on `channel` (the flag is taken: one wake-up per
-- idle period).
local function handoff_wake(handoff, where, pending, waiters, channel, queue)
  while handoff(where) do
  end
  if redis.call('EXISTS', pending) == 1 and redis.call('DEL', waiters) == 1 then
    redis.call('PUBLISH', channel, queue)
  end
end

-- The hand-offs to one worker that are overdue: `handed` (HASH id -> '<pending_since>:<handed
-- at ms>', <base>handoff:<owner>) entries handed `grace_ms` or more before now (`clock()`, Unix
-- ms, read only when there is one) or unreadable: each is dropped from `handed` and given to
-- `take(id, pending_since)` ('0' when unknown), which returns the task if its worker still
-- holds it (a hand-off whose message was lost in flight is picked up so).
local function handoff_overdue(handed, grace_ms, clock, take)
  local fields = redis.call('HGETALL', handed)
  if #fields == 0 then
    return
  end
  local cutoff = clock() - tonumber(grace_ms)
  for f = 1, #fields, 2 do
    local id = fields[f]
    local since, at = string.match(fields[f + 1], '^(%d+):(%d+)$')
    if not at or tonumber(at) <= cutoff then
      redis.call('HDEL', handed, id)
      take(id, since or '0')
    end
  end
end
