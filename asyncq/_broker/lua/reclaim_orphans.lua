#!lua flags=allow-oom
-- reclaim_orphans: give a lease to active tasks that have none, so the recoverer can see them.
-- KEYS[1] active list        asyncq:{q}:active
-- KEYS[2] lease zset         asyncq:{q}:lease
-- ARGV[1] lease expiry to attach, Unix ms (normally now: the task is recovered after the grace)
-- ARGV[2] most active ids to examine
-- Returns: number of leases attached.
-- Dequeue and every completion change the active list and the lease zset in one step, so an id
-- in active without a lease entry can only come from eviction, a restore or a manual edit.
-- @include _reclaim_orphans_body.lua
