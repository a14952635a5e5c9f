#!lua flags=allow-oom
-- reclaim_orphans: give a lease to active tasks that have none, so the recoverer can see them.
-- KEYS[1] active list        asyncq:{q}:active
-- KEYS[2] lease zset         asyncq:{q}:lease
-- ARGV[1] lease expiry to attach, Unix ms (normally now: the task is recovered after the grace)
-- ARGV[2] most active ids to examine
-- Returns: number of leases attached.
-- Dequeue and every completion change the active list and the lease zset in one step, so an id
-- in active without a lease entry can only come from eviction, a restore or a manual edit.
local ids = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = 0
for _, id in ipairs(ids) do
  if not redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZADD', KEYS[2], ARGV[1], id)
    n = n + 1
  end
end
return n
