#!lua flags=allow-oom
-- asynq_reclaim_orphans: give a lease to active tasks that have none (eviction, a restore, a
--   manual edit: Go's and asyncq's dequeue write both at once), so a recoverer can see them.
--   asynq has no such step; the lease ending now is still recovered by Go's rules (30 s on).
-- KEYS[1] active list        asynq:{q}:active
-- KEYS[2] lease zset         asynq:{q}:lease
-- ARGV[1] lease expiry to attach, Unix s (now)
-- ARGV[2] most active ids to examine
-- Returns: number of leases attached.
local ids = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = 0
for _, id in ipairs(ids) do
  if not redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZADD', KEYS[2], ARGV[1], id)
    n = n + 1
  end
end
return n
