-- The limit scripts' hooks for Go asynq's layout, under the names asyncq's layout defines in
-- its _limit_hooks.lua and _limit_wake_hooks.lua: what the shared bodies (the broker's own
-- lua/_limit_*_body.lua) leave to a layout. Here leases and the scheduled set are scored in
-- Unix seconds (a lease holds until the end of its second, a deferred task comes back on a
-- whole second), a task is owned by the run whose lease entry it still carries (asynq_held),
-- a deferral drops asyncq's lease fields of this layout and publishes nothing.
-- @include _asynq_lib.lua
-- @include asyncq:_limit_lib.lua

-- When a task's lease ends, Unix ms: the last ms of the second it is scored at (nil or false:
-- no lease).
local function limit_lease_end(score)
  return score and tonumber(score) * 1000 + 999
end

-- The Redis server's clock, Unix ms to the µs (what rate windows are kept by).
local function limit_server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- Whether the task of hash `tkey` is still held by `owner`'s run (its entry in the lease zset
-- `lease` is the one that run wrote), and whether it waited in a limit's line before (its
-- field 'limited').
local function limit_claimable(tkey, lease, holder, owner)
  local mine = asynq_held(tkey, lease, holder, owner)
  return mine, mine and redis.call('HEXISTS', tkey, 'limited') == 1
end

-- The least pace tolerance of a rate, ms: 1 s for a task (it comes back on a whole second with
-- the others due in that second, and all of them may start), 50 ms for a manual hold (it
-- retries when told).
local function limit_pace_least(manual)
  return manual and 50 or 1000
end

-- When a refused start is due again: its token's time, in whole ms (a task's deferral rounds
-- it up to the second, limit_defer_at).
local function limit_pace_due(due, tolerance)
  return math.ceil(due)
end

-- A deferral's score in asynq's scheduled set (the whole second, Unix s, at or after `due`)
-- and the Unix ms reported for it (that second's start).
local function limit_defer_at(due)
  local at_s = math.ceil(due / 1000)
  return at_s, at_s * 1000
end

-- A deferred task's lease fields are dropped: this run never began.
local function limit_drop_lease(tkey)
  redis.call('HDEL', tkey, 'owner', 'lease_until', 'started_at')
end

-- A deferral publishes no event in this layout.
local function limit_deferred(active, id, limited, due)
end

-- A function(id, from, to) publishing the events of tasks woken (pending_key: the queue's
-- pending list), doing nothing when no client listens.
local function limit_events(pending_key)
  return asynq_events(asynq_base(pending_key, 'pending'))
end

-- Tasks became pending in the queue of `pending_key`: hand them to idle asyncq workers or wake
-- them (asynq_wake).
local function limit_wake(pending_key, channel, queue)
  asynq_wake(asynq_base(pending_key, 'pending'), channel, queue)
end
