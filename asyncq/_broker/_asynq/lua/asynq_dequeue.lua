#!lua flags=allow-oom
-- asynq_dequeue: lease up to N pending tasks to an asyncq worker (pending -> active), each as
--   Go's Dequeue does: RPOPLPUSH (here LMOVE RIGHT LEFT) pending -> active, state active,
--   pending_since dropped, lease entry now + lease; plus the asyncq-only fields owner,
--   lease_until and started_at.
-- KEYS[1] pending list       asynq:{q}:pending
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] paused flag        asynq:{q}:paused
-- KEYS[5] waiters flag       asynq:{q}:asyncq:waiters (asyncq only)
-- KEYS[6] idle workers       asynq:{q}:asyncq:idle (asyncq only)
-- KEYS[7] hand-offs          asynq:{q}:asyncq:handoff:<owner> (asyncq only)
-- KEYS[8] limit registry     asynq:{q}:asyncq:limits (asyncq only): when it holds a
--   concurrency cap of the queue ('o:q:', asynq_limit_set.lua) the reply says so, each task
--   leased here claims a slot of it (asynq_limit_acquire.lua) before it starts, and the owner
--   does not register as idle (asynq_handoff leaves a capped queue's tasks to dequeues)
-- ARGV[1] lease expiry, Unix s
-- ARGV[2] most tasks to lease
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] owner (the worker's server id)
-- ARGV[5] now, Unix ms (started_at)
-- ARGV[6] waiters flag TTL, ms (also how long an idle registration lasts)
-- ARGV[7] lease ms of a hand-off to this worker; '' registers nothing (one-hop pickup off)
-- ARGV[8] grace, ms: hand-offs younger than this are left to their message
-- Returns: {dropped, capped, id1, msg1, asyncq_msg1, pending_since1, id2, ...}: capped 1 when
--   the queue has a concurrency cap (KEYS[8]), else 0; msg the TaskMessage
--   ('' when the hash has none: the worker archives it), asyncq_msg '' for a task Go
--   enqueued, pending_since in Unix ns ('0' unknown). `dropped` counts ids popped without a
--   task hash (or with a key of another type): taken off the active list again, left alone.
-- One-hop pickup (asynq_handoff in _asynq_lib.lua): the tasks handed off to this owner at
--   least ARGV[8] ms ago and still held by that lease (asynq_held: a Go recoverer that took
--   one back and a Go server that leased it again wrote another lease) come first (the worker
--   skips those it holds), so a hand-off whose message was lost is picked up here. A paused queue leases nothing more.
--   When fewer tasks than asked for are leased, the waiters flag is set (the next store, requeue
--   or forward publishes a wake-up) and, with ARGV[7], the owner registers as idle, so the next
--   task to become pending is leased to it directly. Each task leased here is published as the
--   event pending -> active when somebody listens. Go's enqueue wakes nobody: an idle worker
--   sees a Go client's task through its blocked wait on the pending list (_wake.py).
-- @include _asynq_lib.lua
local capped = redis.call('HEXISTS', KEYS[8], 'o:q:')
local out = {0, capped}
-- An overdue hand-off is returned while this owner's run still holds its task (asynq_held).
local function take_handed(id, since)
  local key = ARGV[3] .. id
  if redis.call('TYPE', key).ok == 'hash' and asynq_held(key, KEYS[3], id, ARGV[4]) then
    local v = redis.call('HMGET', key, 'msg', 'asyncq_msg')
    out[#out + 1] = id
    out[#out + 1] = v[1] or ''
    out[#out + 1] = v[2] or ''
    out[#out + 1] = since
  end
end
handoff_overdue(KEYS[7], ARGV[8], asynq_now_ms, take_handed)
if redis.call('EXISTS', KEYS[4]) == 1 then
  return out
end
local base = asynq_base(KEYS[1], 'pending')
local emit = asynq_events(base)
local want = tonumber(ARGV[2])
local n = want
while n > 0 do
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then break end
  local key = ARGV[3] .. id
  local v = redis.pcall('HMGET', key, 'msg', 'asyncq_msg', 'pending_since')
  if v['err'] or (not v[1] and not v[2] and not v[3] and redis.call('EXISTS', key) == 0) then
    redis.call('LREM', KEYS[2], 1, id)
    out[1] = out[1] + 1
  else
    redis.call('HSET', key, 'state', 'active', 'owner', ARGV[4], 'lease_until', ARGV[1],
      'started_at', ARGV[5])
    redis.call('HDEL', key, 'pending_since')
    redis.call('ZADD', KEYS[3], ARGV[1], id)
    out[#out + 1] = id
    out[#out + 1] = v[1] or ''
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    n = n - 1
    emit(id, 'pending', 'active')
  end
end
if n > 0 then
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[6])
  if ARGV[7] ~= '' and capped == 0 then
    local ttl = tonumber(ARGV[6])
    redis.call('ZADD', KEYS[6], asynq_now_ms() + ttl, ARGV[7] .. ':' .. ARGV[4])
    if redis.call('PTTL', KEYS[6]) < ttl then
      redis.call('PEXPIRE', KEYS[6], ttl)
    end
  end
end
return out
