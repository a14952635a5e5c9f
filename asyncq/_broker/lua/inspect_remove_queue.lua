-- inspect_remove_queue: drop every remaining key of an emptied queue.
-- KEYS[1] pending list       KEYS[2] active list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] lease zset         KEYS[8] paused flag
-- KEYS[9] waiters flag       KEYS[10] processed total
-- KEYS[11] failed total      KEYS[12] groups set
-- KEYS[13] aggregation sets  asyncq:{q}:aggregation_sets
-- KEYS[14] registered marker asyncq:{q}:registered (deleted with the queue: the next task
--   stored registers the queue again)
-- KEYS[15] completion marks  asyncq:{q}:marks
-- KEYS[16] archive limits    asyncq:{q}:archive_limits (deleted with the queue, as the pause)
-- KEYS[17] minute samples    asyncq:{q}:minutes
-- KEYS[18] expired total     asyncq:{q}:expired
-- ARGV[1] mode: 'check' (change nothing), 'remove', or 'force' (also delete the tasks staged in
--   aggregation sets and release the locks they own)
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3..] dates (YYYY-MM-DD) whose daily counters are deleted (KEYS[10]/KEYS[11] .. ':' .. date)
-- Returns: {code, active, queued}: queued counts tasks in any state but active and completed
--   (staged aggregation sets count unless forced); code 1 removed (when checking: removable
--   as far as queued tasks go), -1 tasks are active, -2 tasks are queued, -3 completed tasks
--   remain (delete them in batches first: this script never loops over a large set).
-- @include _inspect_lib.lua
local mode = ARGV[1]
local active = redis.call('LLEN', KEYS[2])
local queued = redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[3])
  + redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[5]) + redis.call('SCARD', KEYS[12])
if mode ~= 'force' then
  for _, set_key in ipairs(redis.call('ZRANGE', KEYS[13], 0, -1)) do
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
for _, set_key in ipairs(redis.call('ZRANGE', KEYS[13], 0, -1)) do
  for _, id in ipairs(redis.call('ZRANGE', set_key, 0, -1)) do
    local key = ARGV[2] .. id
    asyncq_release_unique(redis.call('HGET', key, 'unique_key'), id)
    redis.call('DEL', key)
  end
  redis.call('DEL', set_key)
end
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
for i = 3, #ARGV do
  redis.call('DEL', KEYS[10] .. ':' .. ARGV[i], KEYS[11] .. ':' .. ARGV[i])
end
return {1, 0, 0}
