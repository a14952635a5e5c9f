-- Shared helpers, prepended to a script by "-- @include _lib.lua".
-- @include _active_lib.lua
-- @include _event_lib.lua

-- The Redis server's clock, Unix ms: whole ms, or to the µs (precise).
local function asyncq_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function asyncq_now_precise_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- Add `n` (default 1) to a counter; an all-time counter that reaches the int64 maximum
-- starts again from 0.
local function asyncq_incr(key, n)
  n = n or 1
  local ok = redis.pcall('INCRBY', key, n)
  if type(ok) == 'table' and ok.err then
    redis.call('SET', key, n)
  end
  return ok
end

-- Bump an all-time and a daily counter by `n` (default 1); the daily one expires at
-- `expire_at` (Unix ms).
local function asyncq_bump(total_key, daily_key, expire_at, n)
  n = n or 1
  asyncq_incr(total_key, n)
  if redis.call('INCRBY', daily_key, n) == n then
    redis.call('PEXPIREAT', daily_key, expire_at)
  end
end

-- Release a task's uniqueness lock if this task still owns it.
local function asyncq_release_unique(unique_key, task_id)
  if unique_key and unique_key ~= '' and redis.call('GET', unique_key) == task_id then
    redis.call('DEL', unique_key)
  end
end

-- Keep the archive bounded: drop entries older than `oldest` (Unix ms) and the oldest entries
-- beyond `max_size`, at most `limit` of each per call, deleting their task hashes (and releasing
-- the locks they own) so that no orphaned task record is left behind. Returns how many were
-- dropped.
-- The archive caps of a queue: its own (the archive_limits hash: max_size, max_age_ms) where
-- set, else the defaults given (max_size, oldest entry kept in Unix ms); returns max_size and
-- the oldest entry kept, for asyncq_trim_archive.
local function asyncq_archive_limits(limits_key, max_size, oldest, now)
  local v = redis.call('HMGET', limits_key, 'max_size', 'max_age_ms')
  local size = tonumber(v[1]) or tonumber(max_size)
  if v[2] then
    oldest = string.format('%.0f', tonumber(now) - tonumber(v[2]))
  end
  return size, oldest
end

local function asyncq_trim_archive(archived, tprefix, oldest, max_size, limit)
  local dropped = 0
  local function drop(ids)
    for _, id in ipairs(ids) do
      local key = tprefix .. id
      asyncq_release_unique(redis.call('HGET', key, 'unique_key'), id)
      redis.call('DEL', key)
      redis.call('ZREM', archived, id)
      dropped = dropped + 1
    end
  end
  drop(redis.call('ZRANGE', archived, '-inf', '(' .. oldest, 'BYSCORE', 'LIMIT', 0, limit))
  local excess = redis.call('ZCARD', archived) - max_size
  if excess > 0 then
    drop(redis.call('ZRANGE', archived, 0, math.min(excess, limit) - 1))
  end
  return dropped
end

-- Store the traceback of the failure just recorded ('' removes an earlier one, so the
-- traceback shown always belongs to the error stored).
local function asyncq_set_traceback(task_key, traceback)
  if traceback == '' then
    redis.call('HDEL', task_key, 'traceback')
  else
    redis.call('HSET', task_key, 'traceback', traceback)
  end
end

-- Is the task active under this owner ('' = any owner)? Takes HMGET state, owner values.
local function asyncq_owned(state, owner, want_owner)
  return state == 'active' and (want_owner == '' or owner == want_owner)
end

-- May a worker (owner) or the recoverer (owner '', lease cutoff in Unix ms) settle a running
-- task? It must be active under that owner, and for the recoverer its lease must have ended by
-- the cutoff: a lease renewed in the meantime belongs to a live worker.
local function asyncq_may_settle(task_key, lease_key, task_id, owner, cutoff)
  local v = redis.call('HMGET', task_key, 'state', 'owner')
  if not asyncq_owned(v[1], v[2], owner) then
    return false
  end
  if cutoff ~= '' then
    local score = redis.call('ZSCORE', lease_key, task_id)
    if score and tonumber(score) > tonumber(cutoff) then
      return false
    end
  end
  return true
end

-- Task events. A transition publishes an event on its queue's shard channel <base>events only
-- while some process keeps the queue's <base>listening flag alive, so a queue nobody watches
-- pays one EXISTS per script and nothing else. <base> is 'asyncq:{queue}:' (see _keys.py).

-- The queue's key base, from a key that is `base .. suffix`.
local function asyncq_base(key, suffix)
  return string.sub(key, 1, #key - #suffix)
end

local function asyncq_listening(base)
  return redis.call('EXISTS', base .. 'listening') == 1
end

-- Publish one event (event_publish): reads the task's type and retry count from its record,
-- so call it while the record exists.
local function asyncq_emit(base, id, from, to, extra, body)
  local v = redis.call('HMGET', base .. 't:' .. id, 'msg', 'retried')
  local head = {id = id, from = from or '', to = to, at = asyncq_now_ms(),
    retried = tonumber(v[2] or '0') or 0}
  if v[1] then
    local ok, m = pcall(cjson.decode, v[1])
    if ok and type(m) == 'table' and type(m.type) == 'string' then
      head.type = m.type
    end
  end
  event_publish(base .. 'events', head, extra, body)
end

-- One event for one task, if anybody listens; `task_key` is base .. 't:' .. id.
local function asyncq_event(task_key, id, from, to, extra, body)
  local base = asyncq_base(task_key, 't:' .. id)
  if asyncq_listening(base) then
    asyncq_emit(base, id, from, to, extra, body)
  end
end

-- The events of a script that moves many tasks of one queue: `key` is a key of that queue,
-- `base .. suffix`. Returns a function(id, from, to, extra, body) publishing one event
-- (asyncq_emit), which does nothing when nobody listens (asked once, here).
local function asyncq_events(key, suffix)
  local base = asyncq_base(key, suffix)
  if not asyncq_listening(base) then
    return function() end
  end
  return function(id, from, to, extra, body)
    asyncq_emit(base, id, from, to, extra, body)
  end
end

-- The one rule for a result too large for its completion event: more than `max` bytes
-- (EVENT_RESULT_MAX in _broker/_calls.py, passed by the caller).
local function asyncq_result_too_big(result, max)
  return #result > tonumber(max)
end

-- The event of a task (or workflow record) that completed, from state `from`: it carries the
-- result (`renc` its encoding, '' none, and `kept` whether the record keeps it) unless `big`
-- (asyncq_result_too_big): then the event says so and carries none.
local function asyncq_completed_event(task_key, id, from, renc, kept, result, big)
  if big then
    asyncq_event(task_key, id, from, 'completed', {renc = renc, kept = kept, big = true})
  else
    asyncq_event(task_key, id, from, 'completed', {renc = renc, kept = kept}, result)
  end
end
