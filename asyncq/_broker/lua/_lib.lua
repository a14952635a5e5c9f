-- Shared helpers, prepended to a script by "-- @include _lib.lua".

-- Add 1 to a counter; an all-time counter that reaches the int64 maximum starts again at 1.
local function asyncq_incr(key)
  local ok = redis.pcall('INCR', key)
  if type(ok) == 'table' and ok.err then
    redis.call('SET', key, 1)
  end
  return ok
end

-- Bump an all-time and a daily counter; the daily one expires at `expire_at` (Unix ms).
local function asyncq_bump(total_key, daily_key, expire_at)
  asyncq_incr(total_key)
  if redis.call('INCR', daily_key) == 1 then
    redis.call('PEXPIREAT', daily_key, expire_at)
  end
end

-- A task was stored in its queue: set the queue's in-slot registration marker. Returns 3 when
-- the marker was missing (new queue, or deleted since): the caller then adds the queue to the
-- registry asyncq:queues, a key of another slot no script may touch; 1 otherwise.
local function asyncq_stored(marker)
  if redis.call('SET', marker, '1', 'NX') then
    return 3
  end
  return 1
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

-- Publish one event: a JSON header, a newline, then `body` (a result, or nothing). Reads the
-- task's type and retry count from its record, so call it while the record exists.
local function asyncq_emit(base, id, from, to, extra, body)
  local v = redis.call('HMGET', base .. 't:' .. id, 'msg', 'retried')
  local now = redis.call('TIME')
  local head = {id = id, from = from or '', to = to,
    at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000),
    retried = tonumber(v[2] or '0') or 0}
  if v[1] then
    local ok, m = pcall(cjson.decode, v[1])
    if ok and type(m) == 'table' and type(m.type) == 'string' then
      head.type = m.type
    end
  end
  if extra then
    for k, x in pairs(extra) do
      head[k] = x
    end
  end
  redis.call('SPUBLISH', base .. 'events', cjson.encode(head) .. '\n' .. (body or ''))
end

-- One event for one task, if anybody listens; `task_key` is base .. 't:' .. id.
local function asyncq_event(task_key, id, from, to, extra, body)
  local base = asyncq_base(task_key, 't:' .. id)
  if asyncq_listening(base) then
    asyncq_emit(base, id, from, to, extra, body)
  end
end
