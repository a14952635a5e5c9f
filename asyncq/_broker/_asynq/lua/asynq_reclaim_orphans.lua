#!lua flags=allow-oom
-- asynq_reclaim_orphans: give a lease to active tasks that have none (eviction, a restore, a
--   manual edit: Go's and asyncq's dequeue write both at once), so a recoverer can see them.
--   asynq has no such step; the lease ending now is still recovered by Go's rules (30 s on).
-- KEYS[1] active list        asynq:{q}:active
-- KEYS[2] lease zset         asynq:{q}:lease
-- ARGV[1] lease expiry to attach, Unix s (now)
-- ARGV[2] most active ids to examine
-- Returns: number of leases attached.
-- @include asyncq:_reclaim_orphans_body.lua
