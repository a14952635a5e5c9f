-- schedule: a new task to run later (nothing -> scheduled).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] scheduled zset     asyncq:{q}:scheduled
-- KEYS[3] uniqueness lock    asyncq:{q}:unique:...  (read only when ARGV[5] > 0)
-- KEYS[4] registered marker  asyncq:{q}:registered
-- ARGV[1] task id
-- ARGV[2] encoded message (JSON)
-- ARGV[3] payload bytes
-- ARGV[4] process-at, Unix ms (the zset score)
-- ARGV[5] uniqueness TTL in ms, 0 when the task is not unique
-- ARGV[6] group name, '' for none (stored so the forwarder sends the task to its group)
-- ARGV[7] wake channel
-- ARGV[8] queue name
-- Returns: 1 scheduled (3: and the queue must be registered, see asyncq_stored); 0 a task with this id exists; -1 a unique duplicate holds the lock.
-- When the task becomes the earliest scheduled one, "<queue>@<process-at>" is published on the
-- wake channel so workers' forwarders can wake at that time instead of at their next round.
-- @include _store_lib.lua
local code = asyncq_new_task(KEYS[1], KEYS[3], ARGV[1], ARGV[5])
if code ~= 1 then
  return code
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'payload', ARGV[3], 'state', 'scheduled')
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'group', ARGV[6])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
asyncq_event(KEYS[1], ARGV[1], '', 'scheduled', {next = tonumber(ARGV[4])})
if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == ARGV[1] then
  redis.call('PUBLISH', ARGV[7], ARGV[8] .. '@' .. ARGV[4])
end
return asyncq_stored(KEYS[4])
