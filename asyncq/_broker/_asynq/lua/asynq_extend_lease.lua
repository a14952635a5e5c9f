-- asynq_extend_lease: extend an owner's leases, as Go's ExtendLease (ZADD XX; scores in Unix
--   s, so a Go recoverer, which takes leases ended 30 s ago, never takes a run renewed in
--   time), only for the tasks that owner's run still holds.
-- KEYS[1] lease zset         asynq:{q}:lease
-- ARGV[1] new lease expiry, Unix s
-- ARGV[2] owner
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4..] task ids
-- Returns: one flag per id: 1 kept (extended), 2 kept and a cancellation of this run was
--   requested (its field cancel holds the run's started_at), 0 lost.
-- @include _asynq_lib.lua
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = ARGV[3] .. id
  if asynq_held(key, KEYS[1], id, ARGV[2]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], id)
    redis.call('HSET', key, 'lease_until', ARGV[1])
    local run = redis.call('HMGET', key, 'cancel', 'started_at')
    out[#out + 1] = (run[1] and run[1] == run[2]) and 2 or 1
  else
    out[#out + 1] = 0
  end
end
return out
