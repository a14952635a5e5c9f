#!lua flags=allow-oom
-- workflow_drop: the steps of a cancelled workflow that are not running are deleted
-- (waiting/pending/scheduled/retry -> deleted); no outbox record is written for them.
-- KEYS[1] pending list       KEYS[2] scheduled zset     KEYS[3] retry zset
-- KEYS[i+3] task hash        asyncq:{q}:t:<id of step i>
-- ARGV[i] id of step i
-- Returns: one code per step: 1 deleted, 2 running (cancel it), 0 finished or gone.
-- @include _lib.lua
local out = {}
local from_pending = {}
local npending = 0
for i = 1, #KEYS - 3 do
  local key, id = KEYS[i + 3], ARGV[i]
  local state = redis.call('HGET', key, 'state')
  out[i] = 0
  if state == 'active' then
    out[i] = 2
  elseif state == 'waiting' or state == 'pending' or state == 'scheduled'
      or state == 'retry' then
    if state == 'pending' then
      from_pending[id] = true
      npending = npending + 1
    elseif state == 'scheduled' then
      redis.call('ZREM', KEYS[2], id)
    elseif state == 'retry' then
      redis.call('ZREM', KEYS[3], id)
    end
    asyncq_event(key, id, state, 'deleted', {reason = 'workflow cancelled'})
    redis.call('DEL', key)
    out[i] = 1
  end
end
if npending > 16 then
  -- One pass over the list instead of one LREM scan per step.
  local kept = {}
  for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if not from_pending[id] then
      kept[#kept + 1] = id
    end
  end
  redis.call('DEL', KEYS[1])
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(kept, i, math.min(i + 999, #kept)))
  end
elseif npending > 0 then
  for id in pairs(from_pending) do
    redis.call('LREM', KEYS[1], 1, id)
  end
end
return out
