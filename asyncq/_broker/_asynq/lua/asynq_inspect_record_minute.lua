-- asynq_inspect_record_minute: keep a queue's counters once a minute for the dashboard's last
--   hour: a sample 'minute:processed:failed:backlog' pushed on a capped list Go never reads,
--   at most one per minute (the first worker to call in a minute writes it).
-- KEYS[1] minutes list       asynq:{q}:asyncq:minutes (newest first)
-- KEYS[2] processed total    KEYS[3] failed total   (asynq:{q}:processed|failed)
-- KEYS[4] pending list       KEYS[5] active list
-- KEYS[6] scheduled zset     KEYS[7] retry zset
-- ARGV[1] the current minute (Unix ms // 60000)
-- ARGV[2] most samples kept
-- Returns: 1 recorded, 0 this minute already has its sample.
local head = redis.call('LINDEX', KEYS[1], 0)
if head and string.match(head, '^(%d+):') == ARGV[1] then
  return 0
end
local backlog = redis.call('LLEN', KEYS[4]) + redis.call('LLEN', KEYS[5])
  + redis.call('ZCARD', KEYS[6]) + redis.call('ZCARD', KEYS[7])
local sample = ARGV[1] .. ':' .. (redis.call('GET', KEYS[2]) or '0') .. ':'
  .. (redis.call('GET', KEYS[3]) or '0') .. ':' .. backlog
redis.call('LPUSH', KEYS[1], sample)
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return 1
