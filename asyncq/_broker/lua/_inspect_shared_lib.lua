-- The inspector's layout-free helpers (most over a queue's task containers), for both layouts:
-- included by _inspect_lib.lua and by Go asynq's _asynq_inspect_lib.lua (with the
-- shared-include prefix of _asynq/_scripts.py). They build no key name and read no clock: each layout passes its keys.

-- Whether `s` contains `part` (lower-cased), ignoring case; '' is in every text.
local function inspect_contains(s, part)
  return part == '' or string.find(string.lower(s), part, 1, true) ~= nil
end

-- The containers of one task's queue as the single-task scripts pass them: KEYS[2..8] are the
-- pending list, scheduled, retry, archived and completed zsets, the groups set and the
-- aggregation sets zset; ARGV[2] is the group key prefix (the table inspect_detach takes).
local function inspect_task_containers()
  return {pending = KEYS[2], scheduled = KEYS[3], retry = KEYS[4], archived = KEYS[5],
          completed = KEYS[6], groups = KEYS[7], sets = KEYS[8], gprefix = ARGV[2]}
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

-- After a batch taken from a group zset `source` (group name `group`, '' when the source is no
-- group): a group left empty leaves the groups set `groups`.
local function inspect_forget_group(source, groups, group)
  if group ~= '' and redis.call('EXISTS', source) == 0 then
    redis.call('SREM', groups, group)
  end
end

-- The MEMORY USAGE of the task hashes of `ids` (hash key `prefix` .. id) summed, and how many
-- of them exist: a memory estimate's sample.
local function inspect_sampled_usage(prefix, ids)
  local sum, n = 0, 0
  for _, id in ipairs(ids) do
    local u = redis.call('MEMORY', 'USAGE', prefix .. id)
    if u then
      sum = sum + u
      n = n + 1
    end
  end
  return sum, n
end
