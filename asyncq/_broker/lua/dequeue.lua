#!lua flags=allow-oom
-- dequeue: lease up to N pending tasks of one queue to a worker (pending -> active).
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] paused flag        asyncq:{q}:paused
-- KEYS[5] waiters flag       asyncq:{q}:waiters
-- KEYS[6] last request       asyncq:{q}:dequeued:<owner>  (used only when ARGV[6] is set): a
--   hash '=' -> request id, 't:<id>' -> its pending_since for each task it leased
-- ARGV[1] lease expiry, Unix ms
-- ARGV[2] most tasks to lease
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] owner (the worker's server id)
-- ARGV[5] waiters flag TTL in ms
-- ARGV[6] request id, or '' — a request re-sent with the same id (its reply was lost) returns
--   the tasks the first attempt leased, if they are still leased to this owner, instead of
--   leasing more: a lost reply then never strands tasks in active until their lease expires.
-- ARGV[7] how long the last request is remembered, ms
-- ARGV[8] cancel marker prefix asyncq:{q}:cancel: — a new run starts without the cancellation
--   requested for an earlier one
-- KEYS[7] idle workers       asyncq:{q}:idle (ZSET '<lease ms>:<owner>' -> lapse time, ms)
-- KEYS[8] hand-offs          asyncq:{q}:handoff:<owner> (HASH id -> '<pending_since>:<at ms>')
-- ARGV[9] lease ms of a hand-off to this worker; '' registers nothing (one-hop pickup off)
-- ARGV[10] grace, ms: hand-offs younger than this are left to their message
-- ARGV[11] now, Unix ms, by the worker's clock: each leased task's 'started_at' (when its
--   latest run started), so a run's length is measured on the clock that writes its end; a
--   task whose expiry (see _expiry_lib.lua) is not after it is archived instead of leased
-- ARGV[12] most archived tasks kept (default), ARGV[13] oldest kept, ms of age (default)
-- KEYS[9] limit registry     asyncq:{q}:limits  (when it holds a concurrency cap of the queue
--   ('o:q:', see limit_set.lua) the reply says so, every task leased here must claim a slot
--   of it (limit_acquire.lua) before it starts, and the owner does not register as idle (a
--   hand-off skips the claim, so asyncq_handoff leaves a capped queue's tasks to dequeues))
-- ARGV[14] most expired tasks archived by one call: past it, the call stops and publishes
--   ARGV[16] on the wake channel ARGV[15] so the worker dequeues again at once
-- One-hop pickup: the tasks handed off to this owner (asyncq_handoff in _wake_lib.lua) at least
--   ARGV[10] ms ago that are still leased to it are returned first and their records cleared,
--   so a hand-off whose message was lost in flight is picked up here (the worker skips those it
--   already holds; the grace keeps a message merely slower than this reply from delivering
--   the task twice, after it already finished). When fewer tasks than
--   asked for are leased, the owner also registers as idle for ARGV[5] ms, so the next task to
--   become pending is leased and published to it directly.
-- Expired tasks (asyncq_expire) are archived as they are popped and not returned.
-- Returns: {dropped, capped, id1, msg1, payload1, retried1, pending_since1, id2, ...} (capped:
--   1 when the queue has a concurrency cap, see KEYS[9], else 0; pending_since:
--   Unix ms the task last became pending, '0' when unknown). `dropped` counts ids popped
--   without a usable task record (no hash, or a key of another type: removed from the lists and
--   left alone). A hash without its message is leased and returned with an empty message, so
--   the worker archives it with the reason. When fewer tasks than asked for are returned, the
--   waiters flag is set in the same step, so any later enqueue publishes a wake-up: no lost
--   wake-ups. A paused queue leases nothing (the reply holds only the hand-offs above).
-- @include _wake_lib.lua
-- @include _expire_lib.lua
local capped = redis.call('HEXISTS', KEYS[9], 'o:q:')
local out = {0, capped}
local now = tonumber(ARGV[11])
if ARGV[6] ~= '' then
  if redis.call('HGET', KEYS[6], '=') == ARGV[6] then
    local fields = redis.call('HGETALL', KEYS[6])
    for f = 1, #fields, 2 do
      local field = fields[f]
      if string.sub(field, 1, 2) == 't:' then
        local id = string.sub(field, 3)
        local v = redis.pcall('HMGET', ARGV[3] .. id, 'msg', 'payload', 'retried', 'state',
          'owner')
        if v[4] == 'active' and v[5] == ARGV[4] then
          redis.call('ZADD', KEYS[3], ARGV[1], id)
          out[#out + 1] = id
          out[#out + 1] = v[1] or ''
          out[#out + 1] = v[2] or ''
          out[#out + 1] = v[3] or '0'
          out[#out + 1] = fields[f + 1]
        end
      end
    end
    return out
  end
end
-- An overdue hand-off is returned while its task is still active under this owner.
local function take_handed(id, since)
  local v = redis.pcall('HMGET', ARGV[3] .. id, 'msg', 'payload', 'retried', 'state', 'owner')
  if not v.err and v[4] == 'active' and v[5] == ARGV[4] then
    out[#out + 1] = id
    out[#out + 1] = v[1] or ''
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    out[#out + 1] = since
  end
end
handoff_overdue(KEYS[8], ARGV[10], asyncq_now_ms, take_handed)
if redis.call('EXISTS', KEYS[4]) == 1 then
  return out
end
local want = tonumber(ARGV[2])
local emit = asyncq_events(KEYS[1], 'pending')
local got = 0
local leased = {}
local expired = 0
local budget = tonumber(ARGV[14])
while got < want do
  if expired >= budget then
    asyncq_expired_trim(asyncq_base(KEYS[1], 'pending'), now, ARGV[12], ARGV[13])
    redis.call('PUBLISH', ARGV[15], ARGV[16])
    return out
  end
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then
    break
  end
  local key = ARGV[3] .. id
  local v = redis.pcall('HMGET', key, 'msg', 'payload', 'retried', 'pending_since')
  local expires = not v.err and asyncq_expiry(v[1])
  if v.err or (not v[1] and redis.call('EXISTS', key) == 0) then
    redis.call('LREM', KEYS[2], 1, id)
    out[1] = out[1] + 1
  elseif expires and expires <= now then
    redis.call('LREM', KEYS[2], 1, id)
    asyncq_expire(key, id, 'pending', asyncq_expired_reason(expires), now)
    expired = expired + 1
  else
    redis.call('HDEL', key, 'pending_since')
    redis.call('DEL', ARGV[8] .. id)
    redis.call('HSET', key, 'state', 'active', 'owner', ARGV[4], 'started_at', ARGV[11])
    redis.call('ZADD', KEYS[3], ARGV[1], id)
    out[#out + 1] = id
    out[#out + 1] = v[1] or ''
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    out[#out + 1] = v[4] or '0'
    got = got + 1
    leased[got] = {id, v[4] or '0'}
    emit(id, 'pending', 'active')
  end
end
if expired > 0 then
  asyncq_expired_trim(asyncq_base(KEYS[1], 'pending'), now, ARGV[12], ARGV[13])
end
if got < want then
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[5])
  if ARGV[9] ~= '' and capped == 0 then
    redis.call('ZADD', KEYS[7], asyncq_now_ms() + tonumber(ARGV[5]), ARGV[9] .. ':' .. ARGV[4])
  end
end
if ARGV[6] ~= '' and got > 0 then
  redis.call('DEL', KEYS[6])
  local fields = {'=', ARGV[6]}
  for i, item in ipairs(leased) do
    fields[#fields + 1] = 't:' .. item[1]
    fields[#fields + 1] = item[2]
    if #fields >= 500 or i == #leased then
      redis.call('HSET', KEYS[6], unpack(fields))
      fields = {}
    end
  end
  redis.call('PEXPIRE', KEYS[6], ARGV[7])
end
return out
