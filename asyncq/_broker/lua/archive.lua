-- archive: a task failed for good and is kept for inspection (active -> archived).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] archived zset      asyncq:{q}:archived
-- KEYS[5] processed total    KEYS[6] processed today
-- KEYS[7] failed total       KEYS[8] failed today
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] error message (the reason)
-- ARGV[4] now, Unix ms (failed_at and the archived zset score)
-- ARGV[5] daily counter expiry, Unix ms
-- ARGV[6] lease cutoff, Unix ms, or '' (as in retry.lua)
-- ARGV[7] most archived tasks kept
-- ARGV[8] oldest archive entry kept, Unix ms
-- ARGV[9] task key prefix    asyncq:{q}:t:
-- Returns: 1 archived; 0 not active under this owner, or its lease was renewed (no change).
-- Trimming deletes the task hashes of the entries it drops, so no orphaned records remain.
-- @include _lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner')
if not asyncq_owned(v[1], v[2], ARGV[2]) then
  return 0
end
if ARGV[6] ~= '' then
  local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if score and tonumber(score) > tonumber(ARGV[6]) then
    return 0
  end
end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'archived', 'error', ARGV[3], 'failed_at', ARGV[4])
redis.call('HDEL', KEYS[1], 'owner')
local old = redis.call('ZRANGE', KEYS[4], '-inf', '(' .. ARGV[8], 'BYSCORE', 'LIMIT', 0, 1000)
for _, id in ipairs(old) do
  redis.call('DEL', ARGV[9] .. id)
  redis.call('ZREM', KEYS[4], id)
end
local excess = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[7])
if excess > 0 then
  local drop = redis.call('ZRANGE', KEYS[4], 0, excess - 1)
  for _, id in ipairs(drop) do
    redis.call('DEL', ARGV[9] .. id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, excess - 1)
end
asyncq_bump(KEYS[5], KEYS[6], ARGV[5])
asyncq_bump(KEYS[7], KEYS[8], ARGV[5])
return 1
