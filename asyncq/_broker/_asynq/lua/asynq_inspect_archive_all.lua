-- asynq_inspect_archive_all: archive one batch of the tasks in a state
--   (pending/scheduled/retry/completed/aggregating -> archived), as Go's ArchiveAll*Tasks,
--   batch by batch: score now, then the archive trimmed by Go's caps (asynq_inspect_trim).
-- KEYS[1] source             the pending list, the scheduled/retry/completed zset, or a group
--                            zset asynq:{q}:g:<group> for aggregating tasks
-- KEYS[2] archived zset      asynq:{q}:archived
-- KEYS[3] groups set         asynq:{q}:groups
-- ARGV[1] state of the source
-- ARGV[2] batch size: most ids taken from the source by this call (and most trimmed)
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- ARGV[5] now, Unix s (the archived zset score)
-- ARGV[6] archive max size (Go: 10000; at most max size - 1 remain)
-- ARGV[7] age cutoff, Unix s (archived at or before it: deleted)
-- Returns: {ids taken from the source, tasks archived, oldest archived tasks deleted to keep
--   the archive within its caps}. Call again while ids == batch size. Ids without a hash, or
--   in another state, are dropped.
-- @include _asynq_inspect_lib.lua
local batch = tonumber(ARGV[2])
local ids = inspect_take(KEYS[1], ARGV[1] == 'pending', batch)
local archived = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  if redis.call('HGET', key, 'state') == ARGV[1] then
    redis.call('ZADD', KEYS[2], ARGV[5], id)
    redis.call('HSET', key, 'state', 'archived')
    redis.call('HDEL', key, 'pending_since')
    archived = archived + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[3], ARGV[4])
return {#ids, archived, asynq_inspect_trim(KEYS[2], ARGV[3], ARGV[7], tonumber(ARGV[6]), batch)}
