-- asynq_inspect_archive_task: archive one task that is not running
--   (pending/scheduled/retry/completed/aggregating -> archived), as Go's ArchiveTask: score
--   now, then the archive trimmed by Go's caps (see asynq_inspect_trim).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asynq:{q}:groups
-- KEYS[8] aggregation sets   asynq:{q}:aggregation_sets
-- ARGV[1] task id
-- ARGV[2] group key prefix   asynq:{q}:g:
-- ARGV[3] now, Unix s (the archived zset score)
-- ARGV[4] archive max size (Go: 10000; at most max size - 1 remain)
-- ARGV[5] age cutoff, Unix s (archived at or before it: deleted)
-- ARGV[6] task key prefix    asynq:{q}:t:
-- ARGV[7] most archived tasks the trim deletes in this call
-- Returns {code, trimmed}: code 1 archived; 0 no such task; -1 the task is active; -2 it is
--   already archived. trimmed: how many of the oldest archived tasks the caps deleted (their
--   hashes with them). The uniqueness lock is kept (the task still exists), as Go.
-- @include _asynq_inspect_lib.lua
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return {0, 0}
end
if state == 'active' then
  return {-1, 0}
end
if state == 'archived' then
  return {-2, 0}
end
asynq_inspect_detach(inspect_task_containers(), state, ARGV[1], KEYS[1])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'archived')
redis.call('HDEL', KEYS[1], 'pending_since')
return {1, asynq_inspect_trim(KEYS[5], ARGV[6], ARGV[5], tonumber(ARGV[4]),
                              tonumber(ARGV[7]))}
