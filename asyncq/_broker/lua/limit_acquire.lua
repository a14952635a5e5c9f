#!lua flags=allow-oom
-- limit_acquire: take a slot/token of every limit of each task, or defer the task (active ->
-- scheduled) until the next token is due or a slot frees; all or nothing per task.
-- KEYS[1] active list        asyncq:{q}:active
-- KEYS[2] lease zset         asyncq:{q}:lease
-- KEYS[3] scheduled zset     asyncq:{q}:scheduled
-- KEYS[4] limit registry     asyncq:{q}:limits  (HASH '<c|r>:<name>' -> 'n' or 'n/period_ms')
-- ARGV[1] now, Unix ms
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] owner: the worker holding the tasks' leases ('' for a manual hold, see below)
-- ARGV[4...] one claim after another: holder, hold-until ms ('0' for a task: its hold lives
--   as long as its lease; else a manual hold living until then, holder 'm:<id>'), limit
--   count L, then L times: kind ('c' concurrency, 'r' rate), registry field, registry value,
--   key set (asyncq:{q}:limit:...:keys), key value, state prefix (<p>held, <p>wait, <p>win
--   are its keys), size n, period ms.
-- Returns: one number per claim: 0 taken; -1 the task is no longer active under this owner
--   (nothing changed); else the Unix ms it was deferred to (a manual hold is not deferred:
--   that is when to try again).
-- A concurrency slot is a member of <p>held; it counts only while its holder's lease (task)
-- or hold-until time (manual) has not ended, so a dead worker's slots free when its leases
-- expire. A deferred task waits in <p>wait: for a slot, in arrival order, woken by
-- limit_release; for a token, scored by the time its token is due.
-- @include _lib.lua
local now = tonumber(ARGV[1])
local tprefix = ARGV[2]
local owner = ARGV[3]
local base = asyncq_base(KEYS[1], 'active')
local listening = asyncq_listening(base)
local out = {}

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

-- When the token of a refused claim is due: waiters keep their place in line; the k-th
-- waiter gets the token freed when the start k places on in the window leaves it.
local function token_due(win, wait, holder, n, period, c)
  redis.call('ZREMRANGEBYSCORE', wait, '-inf', now - period - 10000)
  local mine = redis.call('ZSCORE', wait, holder)
  local ahead
  if mine then
    ahead = redis.call('ZCOUNT', wait, '-inf', '(' .. mine)
  else
    ahead = redis.call('ZCARD', wait)
  end
  local idx = c - n + ahead
  local e = redis.call('ZRANGE', win, idx % c, idx % c, 'WITHSCORES')
  return tonumber(e[2]) + period * (math.floor(idx / c) + 1)
end

local i = 4
while i <= #ARGV do
  local holder, until_ms, count = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local first = i + 3
  i = first + count * 8
  local tkey = tprefix .. holder
  local manual = until_ms > 0
  local v = manual and {'active', owner} or redis.call('HMGET', tkey, 'state', 'owner')
  if not asyncq_owned(v[1], v[2], owner) then
    out[#out + 1] = -1
  else
    local due = 0
    local refused = {}
    for j = first, i - 1, 8 do
      local kind, state, n, period = ARGV[j], ARGV[j + 5], tonumber(ARGV[j + 6]),
        tonumber(ARGV[j + 7])
      if kind == 'c' then
        if not redis.call('ZSCORE', state .. 'held', holder) then
          local c, earliest = slots(state .. 'held', n)
          if c >= n then
            due = math.max(due, (earliest or now) + 1)
            refused[#refused + 1] = j
          end
        end
      else
        local win = state .. 'win'
        redis.call('ZREMRANGEBYSCORE', win, '-inf', now - period)
        local c = redis.call('ZCARD', win)
        if c >= n then
          due = math.max(due, token_due(win, state .. 'wait', holder, n, period, c))
          refused[#refused + 1] = j
        end
      end
    end
    for j = first, i - 1, 8 do
      redis.call('HSET', KEYS[4], ARGV[j + 1], ARGV[j + 2])
      redis.call('SADD', ARGV[j + 3], ARGV[j + 4])
    end
    if #refused == 0 then
      for j = first, i - 1, 8 do
        local state = ARGV[j + 5]
        if ARGV[j] == 'c' then
          local hold = until_ms
          if not manual then
            hold = tonumber(redis.call('ZSCORE', KEYS[2], holder) or now)
          end
          redis.call('ZADD', state .. 'held', hold, holder)
        else
          redis.call('ZADD', state .. 'win', now, now .. ':' .. holder)
        end
        redis.call('ZREM', state .. 'wait', holder)
      end
      if not manual then
        redis.call('HDEL', tkey, 'limited')
      end
      out[#out + 1] = 0
    else
      due = math.max(due, now + 1)
      local why = {}
      for _, j in ipairs(refused) do
        why[#why + 1] = ARGV[j + 1]
        if not manual then
          if ARGV[j] == 'c' then
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
        redis.call('HDEL', tkey, 'owner')
        redis.call('ZADD', KEYS[3], due, holder)
        redis.call('HSET', tkey, 'state', 'scheduled', 'limited', limited)
        if listening then
          asyncq_emit(base, holder, 'active', 'scheduled', {limited = limited, next = due})
        end
      end
      out[#out + 1] = due
    end
  end
end
return out
