-- Leaving the active list, included by _lib.lua and, with the shared-include prefix, by
-- _asynq_lib.lua: it builds no key name, so one copy serves both layouts.

-- Take a task off its queue's active list. Dequeues push at the head, and tasks end roughly
-- in the order they started, so the id is searched from the tail (LREM -1): a scan of the
-- whole list (LREM 0) cost a few µs of Redis time per task at a worker's concurrency. An id
-- is in the list at most once; a stray copy left by a manual edit would have no lease, gets
-- one from reclaim_orphans and is dropped by list_lease_expired like any orphan.
local function asyncq_leave_active(active, id)
  redis.call('LREM', active, -1, id)
end
