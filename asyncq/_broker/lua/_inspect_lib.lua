-- Helpers shared by the inspector scripts, included by "-- @include _inspect_lib.lua".
-- Every key is built from prefixes of one queue (asyncq:{q}:...), so a script stays in one slot.

-- Release a task's uniqueness lock if this task still owns it.
local function inspect_release_unique(unique_key, task_id)
  if unique_key and unique_key ~= '' and redis.call('GET', unique_key) == task_id then
    redis.call('DEL', unique_key)
  end
end

-- Wake idle workers of a queue: only if one of them left a waiters flag.
local function inspect_wake(waiters_key, channel, queue)
  if redis.call('DEL', waiters_key) == 1 then
    redis.call('PUBLISH', channel, queue)
  end
end

-- Remove a task id from the container of its state. `c` maps state names to container keys
-- (pending list; scheduled/retry/archived/completed zsets) plus `groups` (the groups set),
-- `sets` (the aggregation sets zset) and `gprefix` (asyncq:{q}:g:). An aggregating task is
-- removed from its group zset (the group name leaves the groups set once empty) and from any
-- aggregation set it was staged in.
local function inspect_detach(c, state, task_id, group)
  if state == 'pending' then
    redis.call('LREM', c.pending, 0, task_id)
  elseif state == 'aggregating' then
    if group and group ~= '' then
      local gkey = c.gprefix .. group
      redis.call('ZREM', gkey, task_id)
      if redis.call('ZCARD', gkey) == 0 then
        redis.call('SREM', c.groups, group)
      end
    end
    for _, set_key in ipairs(redis.call('ZRANGE', c.sets, 0, -1)) do
      redis.call('ZREM', set_key, task_id)
    end
  elseif c[state] then
    redis.call('ZREM', c[state], task_id)
  end
end

-- Keep the archive bounded: drop entries older than `oldest` (Unix ms) and the oldest entries
-- beyond `max_size`, at most `limit` of each per call, deleting their task hashes (and releasing
-- the locks they own) so that no orphaned task record is left behind.
local function inspect_trim_archive(archived, tprefix, oldest, max_size, limit)
  local function drop(ids)
    for _, id in ipairs(ids) do
      local key = tprefix .. id
      inspect_release_unique(redis.call('HGET', key, 'unique_key'), id)
      redis.call('DEL', key)
      redis.call('ZREM', archived, id)
    end
  end
  drop(redis.call('ZRANGE', archived, '-inf', '(' .. oldest, 'BYSCORE', 'LIMIT', 0, limit))
  local excess = redis.call('ZCARD', archived) - max_size
  if excess > 0 then
    drop(redis.call('ZRANGE', archived, 0, math.min(excess, limit) - 1))
  end
end

-- Take up to `n` ids from the front of a container, in processing order, and remove them from
-- it: the tail of the pending list (workers pop from the tail), the lowest scores of a zset.
-- Returns the ids, oldest first.
local function inspect_take(key, is_list, n)
  if is_list then
    local ids = redis.call('LRANGE', key, -n, -1)
    if #ids > 0 then
      redis.call('LTRIM', key, 0, -(#ids + 1))
    end
    local ordered = {}
    for i = #ids, 1, -1 do
      ordered[#ordered + 1] = ids[i]
    end
    return ordered
  end
  local ids = redis.call('ZRANGE', key, 0, n - 1)
  if #ids > 0 then
    redis.call('ZREMRANGEBYRANK', key, 0, #ids - 1)
  end
  return ids
end
