-- inspect_delete_all: delete one batch of the tasks in a state (not active -> deleted).
-- KEYS[1] source             the pending list, or the scheduled/retry/archived/completed zset,
--                            or a group zset asyncq:{q}:g:<group> for aggregating tasks
-- KEYS[2] groups set         asyncq:{q}:groups
-- ARGV[1] state of the source (pending, scheduled, retry, archived, completed, aggregating)
-- ARGV[2] batch size: most ids taken from the source by this call
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- Returns: {ids taken from the source, tasks deleted}. Call again while ids == batch size.
-- Ids whose task hash is gone are dropped; ids whose hash is in another state (a stale entry)
-- are dropped from the source without touching that task. Locks the tasks own are released.
-- Deleting a workflow step cancels its workflow (an outbox record, as inspect_delete_task).
-- @include _inspect_lib.lua
-- @include _wf_lib.lua

-- Delete task `id` (hash `key`) if it is still in `state`: its lock released, its event
-- published, its workflow cancelled (true); else leave it (false).
local emit = nil
local function inspect_delete_found(key, id, state)
  local v = redis.call('HMGET', key, 'state', 'unique_key', 'wf')
  if v[1] ~= state then
    return false
  end
  asyncq_release_unique(v[2], id)
  emit = emit or asyncq_events(key, 't:' .. id)
  emit(id, state, 'deleted')
  if v[3] then
    asyncq_wf_out(key, id, v[3], 'c', '-', 'deleted')
  end
  redis.call('DEL', key)
  return true
end
-- @include _inspect_delete_all_body.lua
