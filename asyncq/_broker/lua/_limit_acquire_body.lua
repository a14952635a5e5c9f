-- The body of limit_acquire, for both layouts: limit_acquire.lua (asyncq's) and
-- _asynq/lua/asynq_limit_acquire.lua (Go asynq's) document its KEYS, ARGV and reply, and each
-- includes its layout's limit hooks first (_limit_hooks.lua here): lease ends, ownership,
-- pace grain, where a deferred task goes and what it publishes.
local now = tonumber(ARGV[1])
local rnow  -- the server's clock, Unix ms: read once a limit is in force
local tprefix = ARGV[2]
local owner = ARGV[3]
local out = {}
local registered = {}  -- (key set, key) pairs written to the registry by this call

-- When a slot holder's hold ends (Unix ms): a manual hold's own end, a task's lease end; nil
-- or false when the task has no lease any more.
local function expiry(member, score)
  if string.sub(member, 1, 2) == 'm:' then
    return tonumber(score)
  end
  return limit_lease_end(redis.call('ZSCORE', KEYS[2], member))
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

-- Is a start allowed now? Else when the token of this claim is due: waiters keep their
-- place in line; the k-th waiter gets the k-th token, whichever of the window (the start k
-- places on leaving it) and the pace (k intervals after the next one) allows it later.
local function rate_due(state, holder, n, period, burst, manual)
  local interval = period / n
  local win = state .. 'win'
  redis.call('ZREMRANGEBYSCORE', win, '-inf', rnow - period)
  local c = redis.call('ZCARD', win)
  -- Pace tolerance: a start may come this much ahead of its even pace (a burst, or the
  -- layout's least, limit_pace_least).
  local tolerance = math.max((burst - 1) * interval, limit_pace_least(manual))
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
  return limit_pace_due(due, tolerance)
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
rnow = limit_server_ms()

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
    mine, limited = limit_claimable(tkey, KEYS[2], holder, owner)
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
        local at = rate_due(state, holder, n, period, force[j][3], manual)
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
        local why_text, score = table.concat(why, ','), nil
        score, due = limit_defer_at(due)
        redis.call('LREM', KEYS[1], 1, holder)
        redis.call('ZREM', KEYS[2], holder)
        limit_drop_lease(tkey)
        redis.call('ZADD', KEYS[3], score, holder)
        redis.call('HSET', tkey, 'state', 'scheduled', 'limited', why_text)
        limit_deferred(KEYS[1], holder, why_text, due)
      end
      out[#out + 1] = due
    end
  end
end
return out
