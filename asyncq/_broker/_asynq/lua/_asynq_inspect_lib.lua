-- Helpers shared by the asynq_inspect_* scripts (included, never run on their own), with the
-- layout-free ones of the broker's own _inspect_shared_lib.lua. Every key is built from prefixes
-- of one queue (asynq:{q}:...), so a script stays in one slot.
-- @include _asynq_lib.lua
-- @include asyncq:_inspect_shared_lib.lua

-- TaskMessage field numbers read or edited here (besides those of _asynq_lib.lua)
local ASYNQ_TYPE, ASYNQ_PAYLOAD, ASYNQ_GROUP_KEY = 1, 2, 14

-- One task as the inspector reads it, or nil when it has no hash (a stale id):
--   {id, msg, state, result, score, asyncq_msg, result_enc, started_at, error, limited}
-- (msg the protobuf TaskMessage; result false when none; score as given; error asyncq's whole
-- text of the last failure, '' none; limited the limits a scheduled task waits for, '' none:
-- see limit_acquire).
local function asynq_inspect_row(prefix, id, score)
  local v = redis.call('HMGET', prefix .. id, 'msg', 'state', 'result', 'asyncq_msg',
    'result_enc', 'started_at', 'error', 'limited')
  if not v[1] then
    return nil
  end
  return {id, v[1], v[2] or '', v[3] or false, score or false, v[4] or '', v[5] or '',
          v[6] or '0', v[7] or '', v[2] == 'scheduled' and v[8] or ''}
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

-- Remove task `id` (hash `key`) from the container of its `state` (inspect_detach): an
-- aggregating task's group is read from its hash or message first.
local function asynq_inspect_detach(c, state, id, key)
  inspect_detach(c, state, id, state == 'aggregating' and asynq_inspect_group_of(key) or nil)
end

-- Release the uniqueness lock task `id` (hash `key`) holds, if it still holds it (the name
-- asyncq's _inspect_lib.lua gives its own).
local function inspect_release_lock(key, id)
  asynq_release_lock(key, id)
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
