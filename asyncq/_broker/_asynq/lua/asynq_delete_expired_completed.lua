-- asynq_delete_expired_completed: delete completed tasks whose retention ended, as Go's janitor
--   (DeleteExpiredCompletedTasks): the completed zset is scored by the end of retention.
-- KEYS[1] completed zset     asynq:{q}:completed
-- ARGV[1] now, Unix s
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3] most tasks to delete (one batch)
-- Returns: number of tasks deleted.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0,
  tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[2] .. id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids
