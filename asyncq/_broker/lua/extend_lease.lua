#!lua flags=allow-oom
-- extend_lease: a worker renews the leases of the tasks it is running.
-- KEYS[1] lease zset         asyncq:{q}:lease
-- ARGV[1] new lease expiry, Unix ms
-- ARGV[2] owner (the worker's server id)
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] cancel marker prefix asyncq:{q}:cancel:
-- ARGV[5..] task ids
-- Returns: one flag per id: 1 renewed, 2 renewed and a cancellation was requested (its marker
--   exists: the worker cancels the handler), 0 lost (the task is no longer active under this
--   owner — recovered, deleted or taken by another worker — so the worker must stop running it).
-- A task still active under this owner whose lease entry vanished (eviction, a restore) gets its
-- lease back, so it can never be stuck in active without one.
local out = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  local v = redis.pcall('HMGET', ARGV[3] .. id, 'state', 'owner')
  if not v.err and v[1] == 'active' and v[2] == ARGV[2] then
    redis.call('ZADD', KEYS[1], ARGV[1], id)
    out[#out + 1] = 1 + redis.call('EXISTS', ARGV[4] .. id)
  else
    out[#out + 1] = 0
  end
end
return out
