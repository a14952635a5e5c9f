#!lua flags=allow-oom
-- limit_acquire: take a slot/token of every limit of each task, or defer the task (active ->
-- scheduled) until the next token is due or a slot frees; all or nothing per task. A deferred
-- task loses the 'started_at' its lease wrote: that run did not start.
-- KEYS[1] active list        asyncq:{q}:active
-- KEYS[2] lease zset         asyncq:{q}:lease
-- KEYS[3] scheduled zset     asyncq:{q}:scheduled
-- KEYS[4] limit registry     asyncq:{q}:limits  (HASH '<c|r>:<name>' -> the limit as last
--   declared, 'n' or 'n/period_ms/burst'; 'o:<c|r>:<name>' -> a value set at run time that
--   replaces the declared one; 'o:q:' -> the queue's concurrency cap)
-- ARGV[1] now, Unix ms, by the worker's clock (what lease ends are compared with); rate
--   windows use the Redis server's clock instead, read here, so a worker whose call waited
--   (a busy event loop, a slow network) cannot count its starts earlier than they happen.
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] owner: the worker holding the tasks' leases ('' for a manual hold, see below)
-- ARGV[4] L: how many limit keys follow, then L times 9 fields: kind ('c' concurrency,
--   'r' rate, 'q' the queue's cap), registry field, registry value, key set
--   (asyncq:{q}:limit:...:keys), key value, state prefix (<p>held, <p>wait, <p>win, <p>tat are
--   its keys), size n, period ms, burst (rate: how many may start at once). The size in force
--   is the registry's 'o:' value of the field when there is one (read here: a value an
--   operator sets applies to the next claim, no worker restarts), else the declared one; a
--   'q' key has no declared size: without a cap it is skipped (nothing taken or written).
-- ARGV[5 + 9L...] one claim after another: holder, hold-until ms ('0' for a task: its hold
--   lives as long as its lease; else a manual hold living until then, holder 'm:<id>'),
--   limit count C, then C ARGV positions of the first fields of its limit keys.
-- Returns: one number per claim: 0 taken; 1 taken, a slot of the queue's cap among them (to
--   give back with the others); -1 the task is no longer active under this owner (nothing
--   changed); else the Unix ms it was deferred to (a manual hold is not deferred: that is
--   when to try again). A claim with no limit in force (only the cap of a queue without
--   one) is taken without reading its task.
-- A concurrency slot is a member of <p>held (score: when it was taken, or a manual hold's
-- end); it counts only while its holder's lease (task)
-- or hold-until time (manual) has not ended, so a dead worker's slots free when its leases
-- expire. A deferred task waits in <p>wait: for a slot, in arrival order, woken by
-- limit_release (or limit_set, when a size is raised); for a token, scored by the time its
-- token is due.
-- A rate admits a start only while its window (the last `period` ms) holds fewer than n
-- starts, and paces them: one every period/n on average, at most `burst` at once, or as many
-- as 50 ms of pace when that is more (<p>tat is the theoretical time of the next start, as in
-- a cell-rate algorithm).
-- @include _lib.lua
-- @include _limit_lib.lua
local now = tonumber(ARGV[1])
local rnow, emit  -- the server's clock and the events: read once a limit is in force
local tprefix = ARGV[2]
local owner = ARGV[3]
local out = {}
local registered = {}  -- (key set, key) pairs written to the registry by this call

local function expiry(member, score)
  if string.sub(member, 1, 2) == 'm:' then
    return tonumber(score)
  end
  local lease = redis.call('ZSCORE', KEYS[2], member)
  return lease and tonumber(lease)
end

-- Slots in use (holders whose lease ended are dropped) and the earliest end of a live one.
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

-- Is a start allowed now? Else when the token of this claim is due: waiters keep their
-- place in line; the k-th waiter gets the k-th token, whichever of the window (the start k
-- places on leaving it) and the pace (k intervals after the next one) allows it later.
local function rate_due(state, holder, n, period, burst)
  local interval = period / n
  local win = state .. 'win'
  redis.call('ZREMRANGEBYSCORE', win, '-inf', rnow - period)
  local c = redis.call('ZCARD', win)
  -- Pace tolerance: a start may come this much ahead of its even pace (a burst, or a
  -- deferred task back a little late must not lose its token for good).
  local tolerance = math.max((burst - 1) * interval, 50)
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
  -- Deferred tasks come back in groups, on a grid of at most 50 ms (half the tolerance): one
  -- forward and one dequeue per group, not per token.
  local grain = math.min(50, tolerance / 2)
  return math.ceil(math.ceil(due / grain) * grain)
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
rnow = asyncq_now_precise_ms()
emit = asyncq_events(KEYS[1], 'active')

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
  local v = (manual or #keys == 0) and {'active', owner} or redis.call('HMGET', tkey, 'state',
    'owner', 'limited')
  if #keys == 0 then
    out[#out + 1] = 0
  elseif not asyncq_owned(v[1], v[2], owner) then
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
        local at = rate_due(state, holder, n, period, force[j][3])
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
        if v[3] then
          redis.call('ZREM', state .. 'wait', holder)
        end
      end
      if v[3] then
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
        local limited = table.concat(why, ',')
        redis.call('LREM', KEYS[1], 1, holder)
        redis.call('ZREM', KEYS[2], holder)
        redis.call('HDEL', tkey, 'owner', 'started_at')  -- deferred: this run never started
        redis.call('ZADD', KEYS[3], due, holder)
        redis.call('HSET', tkey, 'state', 'scheduled', 'limited', limited)
        emit(holder, 'active', 'scheduled', {limited = limited, next = due})
      end
      out[#out + 1] = due
    end
  end
end
return out
