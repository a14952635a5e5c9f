-- dequeue: lease up to N pending tasks of one queue to a worker (pending -> active).
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] paused flag        asyncq:{q}:paused
-- KEYS[5] waiters flag       asyncq:{q}:waiters
-- ARGV[1] lease expiry, Unix ms
-- ARGV[2] most tasks to lease
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] owner (the worker's server id)
-- ARGV[5] waiters flag TTL in ms
-- Returns: {dropped, id1, msg1, payload1, retried1, id2, ...}. `dropped` counts ids popped
--   without a task hash (removed). When fewer tasks than asked for are returned, the waiters
--   flag is set in the same step, so any later enqueue publishes a wake-up: no lost wake-ups.
-- Paused queues return {0} and lease nothing.
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0}
end
local out = {0}
local want = tonumber(ARGV[2])
local got = 0
while got < want do
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then
    break
  end
  local key = ARGV[3] .. id
  local v = redis.call('HMGET', key, 'msg', 'payload', 'retried')
  if not v[1] then
    redis.call('LREM', KEYS[2], 1, id)
    out[1] = out[1] + 1
  else
    redis.call('HSET', key, 'state', 'active', 'owner', ARGV[4])
    redis.call('HDEL', key, 'pending_since')
    redis.call('ZADD', KEYS[3], ARGV[1], id)
    out[#out + 1] = id
    out[#out + 1] = v[1]
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    got = got + 1
  end
end
if got < want then
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[5])
end
return out
