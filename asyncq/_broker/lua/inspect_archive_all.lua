-- inspect_archive_all: archive one batch of the tasks in a state
--   (pending/scheduled/retry/completed/aggregating -> archived).
-- KEYS[1] source             the pending list, the scheduled/retry/completed zset, or a group
--                            zset asyncq:{q}:g:<group> for aggregating tasks
-- KEYS[2] archived zset      asyncq:{q}:archived
-- KEYS[3] groups set         asyncq:{q}:groups
-- KEYS[4] archive limits     asyncq:{q}:archive_limits (the queue's caps, else ARGV[6]/[7])
-- ARGV[1] state of the source
-- ARGV[2] batch size: most ids taken from the source by this call
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- ARGV[5] now, Unix ms (the archived zset score)
-- ARGV[6] most archived tasks kept
-- ARGV[7] oldest archive entry kept, Unix ms
-- Returns: {ids taken from the source, tasks archived, oldest archived tasks deleted to keep
--   the archive within its caps}. Call again while ids == batch size.
-- The archive is trimmed as by a worker's archive (age and size caps), deleting the task hashes
-- of the entries it drops. Ids without a task hash, or in another state, are dropped.
-- Archiving a workflow step fails its workflow (an outbox record, as inspect_archive_task).
-- @include _inspect_lib.lua
-- @include _wf_lib.lua
local batch = tonumber(ARGV[2])
local ids = inspect_take(KEYS[1], ARGV[1] == 'pending', batch)
local emit = asyncq_events(ARGV[3], 't:')
local archived = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  local v = redis.call('HMGET', key, 'state', 'wf')
  if v[1] == ARGV[1] then
    redis.call('ZADD', KEYS[2], ARGV[5], id)
    redis.call('HSET', key, 'state', 'archived')
    redis.call('HDEL', key, 'pending_since')
    emit(id, ARGV[1], 'archived')
    if v[2] then
      asyncq_wf_out(key, id, v[2], 'f', '-', 'archived by the inspector')
    end
    archived = archived + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[3], ARGV[4])
local max_size, oldest = asyncq_archive_limits(KEYS[4], ARGV[6], ARGV[7], ARGV[5])
local trimmed = asyncq_trim_archive(KEYS[2], ARGV[3], oldest, max_size, batch)
return {#ids, archived, trimmed}
