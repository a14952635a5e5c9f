#!lua flags=allow-oom
-- forward: due scheduled or retry tasks become runnable (scheduled/retry -> pending or aggregating).
-- KEYS[1] source zset        asyncq:{q}:scheduled or asyncq:{q}:retry
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] groups set         asyncq:{q}:groups
-- KEYS[4] waiters flag       asyncq:{q}:waiters
-- ARGV[1] now, Unix ms (due cutoff, pending_since, group score)
-- ARGV[2] most tasks to move
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] group key prefix   asyncq:{q}:g:
-- ARGV[5] wake channel
-- ARGV[6] queue name
-- ARGV[7] most archived tasks kept (default), ARGV[8] oldest kept, ms of age (default)
-- A due task whose expiry is not after ARGV[1] is archived instead (asyncq_expire), counted as
-- moved: it would never start.
-- Returns: {moved, next_due} where next_due is the score of the earliest task left (Unix ms),
--   or -1 when the zset is empty. Ids whose task hash is gone (or is a key of another type) are
--   dropped (counted as moved).
-- @include _wake_lib.lua
-- @include _expire_lib.lua
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
local pushed = false
local emit = asyncq_events(KEYS[2], 'pending')
local now = tonumber(ARGV[1])
local expired = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  local v = redis.pcall('HMGET', key, 'state', 'group', 'msg')
  local expires = not v.err and asyncq_expiry(v[3])
  if not v.err and v[1] then
    if expires and expires <= now then
      asyncq_expire(key, id, v[1], asyncq_expired_reason(expires), now)
      expired = expired + 1
    elseif v[2] and v[2] ~= '' then
      redis.call('ZADD', ARGV[4] .. v[2], ARGV[1], id)
      redis.call('SADD', KEYS[3], v[2])
      redis.call('HSET', key, 'state', 'aggregating')
      emit(id, v[1], 'aggregating', {group = v[2]})
    else
      redis.call('LPUSH', KEYS[2], id)
      redis.call('HSET', key, 'state', 'pending', 'pending_since', ARGV[1])
      pushed = true
      emit(id, v[1], 'pending')
    end
  end
  redis.call('ZREM', KEYS[1], id)
end
if expired > 0 then
  asyncq_expired_trim(asyncq_base(KEYS[2], 'pending'), now, ARGV[7], ARGV[8])
end
if pushed then
  asyncq_wake(KEYS[4], ARGV[5], ARGV[6])
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
  return {#ids, tonumber(first[2])}
end
return {#ids, -1}
