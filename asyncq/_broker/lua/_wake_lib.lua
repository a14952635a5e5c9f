-- Waking idle workers, prepended by "-- @include _wake_lib.lua" (it brings _lib.lua,
-- _expiry_lib.lua and the layout-free steps of _handoff_lib.lua) to the scripts that make
-- tasks pending and to dequeue.lua: kept out of _lib.lua so that every other script stays
-- small (the script cache counts against maxmemory).
-- One-hop pickup. A worker idle on a queue registers in <base>idle (ZSET '<lease ms>:<owner>'
-- -> when the registration lapses, Unix ms of the server's clock), see dequeue.lua. A script
-- that made a task pending then hands the queue's oldest pending task to the longest-idle
-- registered worker: it publishes the task on the worker's shard channel <base>to:<owner> and,
-- only if the worker heard it, leases the task to it exactly as dequeue.lua does and records
-- it in <base>handoff:<owner> (HASH id -> '<pending_since>:<handed at ms>'), which the worker's next dequeue
-- returns so a message lost in flight is recovered then. The task's 'started_at' is then the
-- hand-off time by the server's clock (the lease's clock here too). A registration whose channel nobody
-- listens to (a dead or stopping worker) is dropped and the next one tried. Returns true when
-- a task was handed off (no wake-up is needed then). An expired oldest task is not handed off:
-- it is left to the dequeue the wake-up brings, which archives it (_expire_lib.lua). Nor is a
-- task of a queue with a concurrency cap (<base>limits 'o:q:'): it must claim a slot before it
-- starts, which the worker does for the tasks a dequeue returns (dequeue.lua says so).
-- @include _lib.lua
-- @include _expiry_lib.lua
-- @include _handoff_lib.lua

local function asyncq_handoff(idle_key)
  if redis.call('EXISTS', idle_key) == 0 then
    return false
  end
  local base = asyncq_base(idle_key, 'idle')
  local pending = base .. 'pending'
  local id, key, v = handoff_candidate(base .. 'paused', base .. 'limits', pending, base .. 't:',
    'msg', 'payload', 'retried', 'pending_since')
  if not id then
    return false
  end
  local now = asyncq_now_ms()
  local expires = asyncq_expiry(v[1])
  if expires and expires <= now then
    return false
  end
  return handoff_offer(idle_key, now, function(lease_ms, owner)
    local until_ms = now + tonumber(lease_ms)
    local since = v[4] or '0'
    local data = id .. '\n' .. (v[3] or '0') .. '\n' .. since .. '\n' .. until_ms .. '\n'
      .. #v[1] .. '\n' .. v[1] .. (v[2] or '')
    if redis.call('SPUBLISH', base .. 'to:' .. owner, data) == 0 then
      return false
    end
    redis.call('LMOVE', pending, base .. 'active', 'RIGHT', 'LEFT')
    redis.call('HDEL', key, 'pending_since')
    redis.call('DEL', base .. 'cancel:' .. id)
    redis.call('HSET', key, 'state', 'active', 'owner', owner, 'started_at', now)
    redis.call('ZADD', base .. 'lease', until_ms, id)
    local handed = base .. 'handoff:' .. owner
    redis.call('HSET', handed, id, since .. ':' .. now)
    redis.call('PEXPIRE', handed, lease_ms)
    if asyncq_listening(base) then
      asyncq_emit(base, id, 'pending', 'active')
    end
    return true
  end)
end

-- Tasks became pending: hand them to the queue's idle workers in one hop (asyncq_handoff),
-- then, if some are still pending, wake the idle workers that left a waiters flag.
local function asyncq_wake(waiters_key, channel, queue)
  local base = asyncq_base(waiters_key, 'waiters')
  handoff_wake(asyncq_handoff, base .. 'idle', base .. 'pending', waiters_key, channel, queue)
end
