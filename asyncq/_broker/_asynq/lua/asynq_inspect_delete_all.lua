#!lua flags=allow-oom
-- asynq_inspect_delete_all: delete one batch of the tasks in a state (not active -> deleted),
--   as Go's DeleteAll*Tasks, batch by batch; every lock a deleted task holds is released (Go
--   forgets that for pending and aggregating tasks).
-- KEYS[1] source             the pending list, or the scheduled/retry/archived/completed zset,
--                            or a group zset asynq:{q}:g:<group> for aggregating tasks
-- KEYS[2] groups set         asynq:{q}:groups
-- ARGV[1] state of the source (pending, scheduled, retry, archived, completed, aggregating)
-- ARGV[2] batch size: most ids taken from the source by this call
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- Returns: {ids taken from the source, tasks deleted}. Call again while ids == batch size.
-- Ids whose hash is gone are dropped; ids whose hash is in another state (a stale entry) are
-- dropped from the source without touching that task.
-- @include _asynq_inspect_lib.lua

-- Delete task `id` (hash `key`) if it is still in `state`, releasing its lock (true); else
-- leave it (false).
local function inspect_delete_found(key, id, state)
  if redis.call('HGET', key, 'state') ~= state then
    return false
  end
  asynq_release_lock(key, id)
  redis.call('DEL', key)
  return true
end
-- @include asyncq:_inspect_delete_all_body.lua
