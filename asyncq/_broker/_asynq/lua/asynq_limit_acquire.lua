#!lua flags=allow-oom
-- asynq_limit_acquire: take a slot/token of every limit of each task leased by an asyncq
--   worker, or defer the task (active -> scheduled, as Go's Schedule leaves a task) until its
--   token is due or a slot frees; all or nothing per task. asyncq's limit_acquire.lua over
--   asynq's layout: leases and the scheduled set are scored in Unix seconds there, so a
--   deferred task comes back on a whole second, and a rate lets up to one second of its pace
--   start at once (the window cap, n starts per period, stays exact). Go ignores the limit
--   keys (asynq:{q}:asyncq:...) and the task hash's field `limited`.
-- KEYS[1] active list        asynq:{q}:active
-- KEYS[2] lease zset         asynq:{q}:lease  (task id -> lease end, Unix s)
-- KEYS[3] scheduled zset     asynq:{q}:scheduled  (Unix s)
-- KEYS[4] limit registry     asynq:{q}:asyncq:limits  (HASH '<c|r>:<name>' -> the limit as
--   last declared, 'n' or 'n/period_ms/burst'; 'o:<c|r>:<name>' -> a value set at run time
--   that replaces it; 'o:q:' -> the queue's concurrency cap, which Go's servers ignore)
-- ARGV[1] now, Unix ms, by the worker's clock (what lease ends are compared with); rate
--   windows use the Redis server's clock, read here
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3] owner: the worker holding the tasks' leases ('' for a manual hold)
-- ARGV[4] L: how many limit keys follow, then L times 9 fields: kind ('c' concurrency,
--   'r' rate, 'q' the queue's cap), registry field, registry value, key set
--   (asynq:{q}:asyncq:limit:...:keys), key value, state prefix (<p>held, <p>wait, <p>win,
--   <p>tat), size n, period ms, burst. The size in force is the registry's 'o:' value of the
--   field when there is one (read here), else the declared one; a 'q' key has no declared
--   size: without a cap it is skipped (nothing taken or written).
-- ARGV[5 + 9L...] one claim after another: holder, hold-until ms ('0' for a task: its slot
--   lives as long as its lease; else a manual hold until then, holder 'm:<id>'), limit count
--   C, then C ARGV positions of the first fields of its limit keys.
-- Returns: one number per claim: 0 taken; 1 taken, a slot of the queue's cap among them; -1
--   the task is no longer held by this owner's run (nothing changed); else the Unix ms it
--   was deferred to (a whole second for a task; for a manual hold, which is not deferred,
--   when to try again). A claim with no limit in force is taken without reading its task.
-- @include _asynq_lib.lua
-- @include asyncq:_limit_lib.lua
local now = tonumber(ARGV[1])
local rnow  -- the server's clock, Unix ms: read once a limit is in force
local tprefix = ARGV[2]
local owner = ARGV[3]
local out = {}
local registered = {}

-- When a slot holder's hold ends (Unix ms): a manual hold's own end, a task's lease end (the
-- whole second of its lease score); nil when the task has no lease any more.
local function expiry(member, score)
  if string.sub(member, 1, 2) == 'm:' then
    return tonumber(score)
  end
  local lease = redis.call('ZSCORE', KEYS[2], member)
  return lease and tonumber(lease) * 1000 + 999
end

-- Slots in use (holders whose hold ended are dropped) and the earliest end of a live one.
local function slots(held, n)
  local c = redis.call('ZCARD', held)
  if c < n then
    return c, nil
  end
  local members = redis.call('ZRANGE', held, 0, -1, 'WITHSCORES')
  local earliest = nil
  for j = 1, #members, 2 do
    local e = expiry(members[j], members[j + 1])
    if not e or e < now then
      redis.call('ZREM', held, members[j])
      c = c - 1
    elseif not earliest or e < earliest then
      earliest = e
    end
  end
  return c, earliest
end

-- 0 when a start is allowed now, else when this holder's token is due (Unix ms): waiters keep
-- their place in line; the k-th waiter gets the k-th token, whichever of the window and the
-- pace allows it later. `least` is the least pace tolerance: 1 s for a task (it comes back
-- on a whole second with the others due in that second, and all of them may start), 50 ms
-- for a manual hold (it retries when told).
local function rate_due(state, holder, n, period, burst, least)
  local interval = period / n
  local win = state .. 'win'
  redis.call('ZREMRANGEBYSCORE', win, '-inf', rnow - period)
  local c = redis.call('ZCARD', win)
  local tolerance = math.max((burst - 1) * interval, least)
  local next_at = tonumber(redis.call('GET', state .. 'tat') or '0') - tolerance
  if c < n and rnow >= next_at then
    return 0
  end
  local wait = state .. 'wait'
  redis.call('ZREMRANGEBYSCORE', wait, '-inf', rnow - period - 10000)
  local mine = redis.call('ZSCORE', wait, holder)
  local ahead
  if mine then
    ahead = redis.call('ZCOUNT', wait, '-inf', '(' .. mine)
  else
    ahead = redis.call('ZCARD', wait)
  end
  local due = math.max(next_at, rnow) + ahead * interval
  if c >= n then
    local idx = c - n + ahead
    local e = redis.call('ZRANGE', win, idx % c, idx % c, 'WITHSCORES')
    if e[2] then
      due = math.max(due, tonumber(e[2]) + period * (math.floor(idx / c) + 1))
    end
  end
  return math.ceil(due)
end

-- The size in force of each limit key, by the ARGV position of its first field.
local force = asyncq_limits_in_force(KEYS[4], 5, tonumber(ARGV[4]))
if next(force) == nil then
  -- Nothing in force (only the cap of a queue without one): every claim is taken as it is.
  local i = 5 + tonumber(ARGV[4]) * 9
  while i <= #ARGV do
    out[#out + 1] = 0
    i = i + 3 + tonumber(ARGV[i + 2])
  end
  return out
end
local t = redis.call('TIME')
rnow = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

local i = 5 + tonumber(ARGV[4]) * 9
while i <= #ARGV do
  local holder, until_ms, count = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local first = i + 3
  i = first + count
  local tkey = tprefix .. holder
  local manual = until_ms > 0
  local keys, capped = {}, 0  -- the claim's limit keys in force
  for x = first, i - 1 do
    local j = tonumber(ARGV[x])
    if force[j] then
      keys[#keys + 1] = j
      if ARGV[j] == 'q' then
        capped = 1
      end
    end
  end
  local mine, limited = true, false
  if not manual and #keys > 0 then
    mine = asynq_held(tkey, KEYS[2], holder, owner)
    limited = mine and redis.call('HEXISTS', tkey, 'limited') == 1
  end
  if #keys == 0 then
    out[#out + 1] = 0
  elseif not mine then
    out[#out + 1] = -1
  else
    local due = 0
    local refused = {}
    for _, j in ipairs(keys) do
      local kind, state, n, period = ARGV[j], ARGV[j + 5], force[j][1], force[j][2]
      if kind ~= 'r' then
        local held = state .. 'held'
        if redis.call('ZCARD', held) >= n and not redis.call('ZSCORE', held, holder) then
          local c, earliest = slots(held, n)
          if c >= n then
            due = math.max(due, (earliest or now) + 1)
            refused[#refused + 1] = j
          end
        end
      else
        local at = rate_due(state, holder, n, period, force[j][3], manual and 50 or 1000)
        if at > 0 then
          due = math.max(due, at)
          refused[#refused + 1] = j
        end
      end
    end
    for _, j in ipairs(keys) do
      local seen = ARGV[j + 3] .. '\n' .. ARGV[j + 4]
      if ARGV[j] ~= 'q' and not registered[seen] then
        registered[seen] = true
        redis.call('HSET', KEYS[4], ARGV[j + 1], ARGV[j + 2])
        redis.call('SADD', ARGV[j + 3], ARGV[j + 4])
      end
    end
    if #refused == 0 then
      for _, j in ipairs(keys) do
        local state = ARGV[j + 5]
        if ARGV[j] ~= 'r' then
          redis.call('ZADD', state .. 'held', manual and until_ms or now, holder)
        else
          local period = force[j][2]
          local tat = tonumber(redis.call('GET', state .. 'tat') or '0')
          redis.call('ZADD', state .. 'win', rnow, rnow .. ':' .. holder)
          redis.call('PEXPIRE', state .. 'win', period + 1000)
          redis.call('SET', state .. 'tat', math.max(tat, rnow) + period / force[j][1],
            'PX', period + 1000)
        end
        if limited then
          redis.call('ZREM', state .. 'wait', holder)
        end
      end
      if limited then
        redis.call('HDEL', tkey, 'limited')
      end
      out[#out + 1] = capped
    else
      due = math.max(due, now + 1)
      local why = {}
      for _, j in ipairs(refused) do
        why[#why + 1] = ARGV[j + 1]
        if not manual then
          if ARGV[j] ~= 'r' then
            redis.call('ZADD', ARGV[j + 5] .. 'wait', 'NX', now, holder)
          else
            redis.call('ZADD', ARGV[j + 5] .. 'wait', due, holder)
          end
        end
      end
      if not manual then
        local at_s = math.ceil(due / 1000)
        due = at_s * 1000
        redis.call('LREM', KEYS[1], 1, holder)
        redis.call('ZREM', KEYS[2], holder)
        redis.call('HDEL', tkey, 'owner', 'lease_until', 'started_at')  -- this run never began
        redis.call('ZADD', KEYS[3], at_s, holder)
        redis.call('HSET', tkey, 'state', 'scheduled', 'limited', table.concat(why, ','))
      end
      out[#out + 1] = due
    end
  end
end
return out
