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

-- Wake idle workers of a queue: only if one of them left a waiters flag.
local function asyncq_wake(waiters_key, channel, queue)
  if redis.call('DEL', waiters_key) == 1 then
    redis.call('PUBLISH', channel, queue)
  end
end

-- Release a task's uniqueness lock if this task still owns it.
local function asyncq_release_unique(unique_key, task_id)
  if unique_key and unique_key ~= '' and redis.call('GET', unique_key) == task_id then
    redis.call('DEL', unique_key)
  end
end

-- Is the task active under this owner ('' = any owner)? Takes HMGET state, owner values.
local function asyncq_owned(state, owner, want_owner)
  return state == 'active' and (want_owner == '' or owner == want_owner)
end
