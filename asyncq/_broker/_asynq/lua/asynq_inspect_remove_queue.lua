#!lua flags=allow-oom
-- asynq_inspect_remove_queue: drop every remaining key of an emptied queue (Go's RemoveQueue
--   drops the task lists and leaves counters, completed tasks, groups and the pause behind;
--   this drops them all, so a queue created again starts clean).
-- KEYS[1] pending list       KEYS[2] active list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] lease zset         KEYS[8] paused flag
-- KEYS[9] processed total    KEYS[10] failed total
-- KEYS[11] groups set        asynq:{q}:groups
-- KEYS[12] aggregation sets  asynq:{q}:aggregation_sets
-- KEYS[13] minute samples    asynq:{q}:asyncq:minutes
-- ARGV[1] mode: 'check' (change nothing), 'remove', or 'force' (also delete the tasks staged
--   in aggregation sets and release the locks they hold)
-- ARGV[2] task key prefix    asynq:{q}:t:
-- ARGV[3..] dates (YYYY-MM-DD) whose daily counters are deleted (KEYS[9]/KEYS[10] .. ':' .. date)
-- Returns: {code, active, queued}: queued counts tasks in any state but active and completed
--   (staged aggregation sets count unless forced); code 1 removed (when checking: removable
--   as far as queued tasks go), -1 tasks are active, -2 tasks are queued, -3 completed tasks
--   remain (delete them in batches first: this script never loops over a large set).
-- @include _asynq_inspect_lib.lua
local mode = ARGV[1]
local active = redis.call('LLEN', KEYS[2])
local queued = redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[3])
  + redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[5]) + redis.call('SCARD', KEYS[11])
if mode ~= 'force' then
  for _, set_key in ipairs(redis.call('ZRANGE', KEYS[12], 0, -1)) do
    queued = queued + redis.call('ZCARD', set_key)
  end
end
if active > 0 then
  return {-1, active, queued}
end
if queued > 0 then
  return {-2, active, queued}
end
if mode == 'check' then
  return {1, 0, 0}
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return {-3, 0, 0}
end
for _, set_key in ipairs(redis.call('ZRANGE', KEYS[12], 0, -1)) do
  for _, id in ipairs(redis.call('ZRANGE', set_key, 0, -1)) do
    asynq_release_lock(ARGV[2] .. id, id)
    redis.call('DEL', ARGV[2] .. id)
  end
  redis.call('DEL', set_key)
end
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
for i = 3, #ARGV do
  redis.call('DEL', KEYS[9] .. ':' .. ARGV[i], KEYS[10] .. ':' .. ARGV[i])
end
return {1, 0, 0}
