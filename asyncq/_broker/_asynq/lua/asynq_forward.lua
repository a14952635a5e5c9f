-- asynq_forward: move due scheduled or retry tasks on (-> pending, or -> aggregating when the
--   hash has a group), as Go's forward script; also adds the group's name to the groups set
--   (Go's forward does not, leaving such a group unseen by an aggregator until its next add).
-- KEYS[1] source zset        asynq:{q}:scheduled or asynq:{q}:retry
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] groups set         asynq:{q}:groups
-- ARGV[1] now, Unix s
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3] now, Unix ns (pending_since)
-- ARGV[4] group key prefix   asynq:{q}:g:
-- ARGV[5] most tasks to move
-- ARGV[6] wake channel       asynq:asyncq:wake (asyncq only)
-- ARGV[7] queue name (the wake-up message)
-- Returns: {moved, next due}: next due is the score (Unix s) of the earliest task left, -1
--   when none is. An id without a task hash is dropped from the source (counted as moved).
-- asyncq's additions (Go's forwarder does neither): each move is published as an event when
--   somebody listens; then tasks made pending are handed to idle asyncq workers in one hop, or
--   the idle workers are woken (asynq_wake).
-- @include _asynq_lib.lua
local base = asynq_base(KEYS[2], 'pending')
local emit = asynq_events(base)
local made_pending = false
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[5])
for _, id in ipairs(ids) do
  local key = ARGV[2] .. id
  redis.call('ZREM', KEYS[1], id)
  if redis.call('EXISTS', key) == 1 then
    local v = redis.call('HMGET', key, 'group', 'state')
    local group = v[1]
    if group and group ~= '' then
      redis.call('ZADD', ARGV[4] .. group, ARGV[1], id)
      redis.call('SADD', KEYS[3], group)
      redis.call('HSET', key, 'state', 'aggregating')
      emit(id, v[2], 'aggregating', {group = group})
    else
      redis.call('LPUSH', KEYS[2], id)
      redis.call('HSET', key, 'state', 'pending', 'pending_since', ARGV[3])
      emit(id, v[2], 'pending')
      made_pending = true
    end
  end
end
if made_pending then
  asynq_wake(base, ARGV[6], ARGV[7])
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#ids, first[2] and tonumber(first[2]) or -1}
