#!lua flags=allow-oom
-- asynq_dequeue: lease up to N pending tasks to an asyncq worker (pending -> active), each as
--   Go's Dequeue does: RPOPLPUSH (here LMOVE RIGHT LEFT) pending -> active, state active,
--   pending_since dropped, lease entry now + lease; plus the asyncq-only fields owner,
--   lease_until and started_at.
-- KEYS[1] pending list       asynq:{q}:pending
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] paused flag        asynq:{q}:paused
-- ARGV[1] lease expiry, Unix s
-- ARGV[2] most tasks to lease
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] owner (the worker's server id)
-- ARGV[5] now, Unix ms (started_at)
-- Returns: {dropped, id1, msg1, asyncq_msg1, pending_since1, id2, ...}: msg the TaskMessage
--   ('' when the hash has none: the worker archives it), asyncq_msg '' for a task Go
--   enqueued, pending_since in Unix ns ('0' unknown). `dropped` counts ids popped without a
--   task hash (or with a key of another type): taken off the active list again, left alone.
--   A paused queue returns {0} and leases nothing.
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0}
end
local out = {0}
local n = tonumber(ARGV[2])
while n > 0 do
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then break end
  local key = ARGV[3] .. id
  local v = redis.pcall('HMGET', key, 'msg', 'asyncq_msg', 'pending_since')
  if v['err'] or redis.call('EXISTS', key) == 0 then
    redis.call('LREM', KEYS[2], 1, id)
    out[1] = out[1] + 1
  else
    redis.call('HSET', key, 'state', 'active', 'owner', ARGV[4], 'lease_until', ARGV[1],
      'started_at', ARGV[5])
    redis.call('HDEL', key, 'pending_since')
    redis.call('ZADD', KEYS[3], ARGV[1], id)
    out[#out + 1] = id
    out[#out + 1] = v[1] or ''
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    n = n - 1
  end
end
return out
