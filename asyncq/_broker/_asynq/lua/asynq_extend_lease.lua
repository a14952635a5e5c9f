-- asynq_extend_lease: extend an owner's leases, as Go's ExtendLease (ZADD XX), only for the
--   tasks that owner's run still holds.
-- KEYS[1] lease zset         asynq:{q}:lease
-- ARGV[1] new lease expiry, Unix s
-- ARGV[2] owner
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4..] task ids
-- Returns: one flag per id: 1 kept (extended), 0 lost.
-- @include _asynq_lib.lua
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = ARGV[3] .. id
  if asynq_held(key, KEYS[1], id, ARGV[2]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], id)
    redis.call('HSET', key, 'lease_until', ARGV[1])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
