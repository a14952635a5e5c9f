-- The limit scripts' hooks for asyncq's layout: what the shared bodies (_limit_*_body.lua)
-- leave to a layout, defined under the same names in _asynq/lua/_asynq_limit_hooks.lua for Go
-- asynq's. Here leases and the scheduled set are scored in Unix ms, ownership is the task
-- hash's state and owner, and a deferral is published as a task event.
-- @include _lib.lua
-- @include _limit_lib.lua

-- When a task's lease ends, Unix ms, from its lease score (nil or false: no lease).
local function limit_lease_end(score)
  return score and tonumber(score)
end

-- The Redis server's clock, Unix ms to the µs (what rate windows are kept by).
local function limit_server_ms()
  return asyncq_now_precise_ms()
end

-- Whether the task of hash `tkey` is active under `owner` (the worker claiming for it), and
-- whether it waited in a limit's line before (its field 'limited'): one HMGET (the lease zset
-- `lease` is not read here).
local function limit_claimable(tkey, lease, holder, owner)
  local v = redis.call('HMGET', tkey, 'state', 'owner', 'limited')
  local mine = asyncq_owned(v[1], v[2], owner)
  return mine, mine and v[3] ~= false
end

-- The least pace tolerance of a rate, ms: a start may come this much ahead of its even pace
-- (a deferred task back a little late must not lose its token for good).
local function limit_pace_least(manual)
  return 50
end

-- When a refused start is due again, from its token's time `due`: deferred tasks come back in
-- groups on a grid of at most 50 ms (half the tolerance), one forward and one dequeue per group.
local function limit_pace_due(due, tolerance)
  local grain = math.min(50, tolerance / 2)
  return math.ceil(math.ceil(due / grain) * grain)
end

-- A deferral's score in the scheduled set and the Unix ms reported for it (the same here).
local function limit_defer_at(due)
  return due, due
end

-- A deferred task's lease fields are dropped: this run never started.
local function limit_drop_lease(tkey)
  redis.call('HDEL', tkey, 'owner', 'started_at')
end

-- The event of a deferral (active -> scheduled), when some client listens (asked once).
local limit_defer_emit
local function limit_deferred(active, id, limited, due)
  limit_defer_emit = limit_defer_emit or asyncq_events(active, 'active')
  limit_defer_emit(id, 'active', 'scheduled', {limited = limited, next = due})
end

-- A function(id, from, to) publishing the events of tasks woken (pending_key: the queue's
-- pending list), doing nothing when no client listens.
local function limit_events(pending_key)
  return asyncq_events(pending_key, 'pending')
end
