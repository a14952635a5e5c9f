-- Helpers shared by the asynq_inspect_* scripts (included, never run on their own). Every key
-- is built from prefixes of one queue (asynq:{q}:...), so a script stays in one slot.
-- @include _asynq_lib.lua

-- TaskMessage field numbers read or edited here (besides those of _asynq_lib.lua)
local ASYNQ_TYPE, ASYNQ_PAYLOAD, ASYNQ_GROUP_KEY = 1, 2, 14

-- One task as the inspector reads it, or nil when it has no hash (a stale id):
--   {id, msg, state, result, score, asyncq_msg, result_enc, started_at}
-- (msg the protobuf TaskMessage; result false when none; score as given).
local function asynq_inspect_row(prefix, id, score)
  local v = redis.call('HMGET', prefix .. id, 'msg', 'state', 'result', 'asyncq_msg',
    'result_enc', 'started_at')
  if not v[1] then
    return nil
  end
  return {id, v[1], v[2] or '', v[3] or false, score or false, v[4] or '', v[5] or '',
          v[6] or '0'}
end

-- The containers of one task's queue as the single-task scripts pass them: KEYS[2..8] are the
-- pending list, scheduled, retry, archived and completed zsets, the groups set and the
-- aggregation sets zset; ARGV[2] is the group key prefix.
local function asynq_inspect_containers()
  return {pending = KEYS[2], scheduled = KEYS[3], retry = KEYS[4], archived = KEYS[5],
          completed = KEYS[6], groups = KEYS[7], sets = KEYS[8], gprefix = ARGV[2]}
end

-- The group of an aggregating task: its hash's `group` field (written by AddToGroup and the
-- forwarder), else its message's group_key.
local function asynq_inspect_group_of(key)
  local v = redis.call('HMGET', key, 'group', 'msg')
  if v[1] and v[1] ~= '' then
    return v[1]
  end
  return asynq_pb_string(v[2] or '', ASYNQ_GROUP_KEY)
end

-- Remove task `id` (hash `key`) from the container of its `state` (see
-- asynq_inspect_containers): an aggregating task leaves its group zset (the group name leaves
-- the groups set once empty, as Go's scripts do) and any aggregation set it was staged in.
local function asynq_inspect_detach(c, state, id, key)
  if state == 'pending' then
    redis.call('LREM', c.pending, 0, id)
  elseif state == 'aggregating' then
    local group = asynq_inspect_group_of(key)
    if group ~= '' then
      local gkey = c.gprefix .. group
      redis.call('ZREM', gkey, id)
      if redis.call('ZCARD', gkey) == 0 then
        redis.call('SREM', c.groups, group)
      end
    end
    for _, set_key in ipairs(redis.call('ZRANGE', c.sets, 0, -1)) do
      redis.call('ZREM', set_key, id)
    end
  elseif c[state] then
    redis.call('ZREM', c[state], id)
  end
end

-- Take up to `n` ids from the front of a container, in processing order, and remove them: the
-- tail of the pending list (workers pop from the tail), the lowest scores of a zset. Returns
-- the ids, oldest first.
local function asynq_inspect_take(key, is_list, n)
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

-- After a batch taken from a group zset `source` (named `group`; '' when the source is no
-- group): a group left empty leaves the groups set `groups`.
local function asynq_inspect_forget_group(source, groups, group)
  if group ~= '' and redis.call('EXISTS', source) == 0 then
    redis.call('SREM', groups, group)
  end
end

-- Trim the archive as Go does after archiving (entries archived at or before `cutoff`, Unix s,
-- then the oldest so that at most max_size - 1 remain), deleting the task hashes of the
-- entries dropped (Go's inspector leaves them behind; its processor deletes them), at most
-- `limit` entries per call. Returns how many were dropped.
local function asynq_inspect_trim(archived, prefix, cutoff, max_size, limit)
  local dropped = 0
  local old = redis.call('ZRANGE', archived, '-inf', cutoff, 'BYSCORE', 'LIMIT', 0, limit)
  for _, id in ipairs(old) do
    redis.call('DEL', prefix .. id)
    redis.call('ZREM', archived, id)
    dropped = dropped + 1
  end
  local over = redis.call('ZCARD', archived) - (max_size - 1)
  if over > 0 and dropped < limit then
    local extra = redis.call('ZRANGE', archived, 0, math.min(over, limit - dropped) - 1)
    for _, id in ipairs(extra) do
      redis.call('DEL', prefix .. id)
      redis.call('ZREM', archived, id)
      dropped = dropped + 1
    end
  end
  return dropped
end

-- Make task `id` (hash `key`, coming from `state`) pending: at the head of the pending list
-- (the end of the line), with pending_since (Unix ns, so the queue's latency counts from now;
-- Go's RunTask leaves it unset) and without a completion time left from an earlier run.
local function asynq_inspect_make_pending(key, id, state, pending, now_ns)
  redis.call('LPUSH', pending, id)
  redis.call('HSET', key, 'state', 'pending', 'pending_since', now_ns)
  if state == 'completed' then
    local msg = redis.call('HGET', key, 'msg') or ''
    redis.call('HSET', key, 'msg', asynq_pb_edit(msg, {[ASYNQ_COMPLETED_AT] = 0}))
  end
end
