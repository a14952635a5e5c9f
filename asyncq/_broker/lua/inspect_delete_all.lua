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
local ids = inspect_take(KEYS[1], ARGV[1] == 'pending', tonumber(ARGV[2]))
local emit = asyncq_events(ARGV[3], 't:')
local deleted = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  local v = redis.call('HMGET', key, 'state', 'unique_key', 'wf')
  if v[1] == ARGV[1] then
    asyncq_release_unique(v[2], id)
    emit(id, ARGV[1], 'deleted')
    if v[3] then
      asyncq_wf_out(key, id, v[3], 'c', '-', 'deleted')
    end
    redis.call('DEL', key)
    deleted = deleted + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[2], ARGV[4])
return {#ids, deleted}
