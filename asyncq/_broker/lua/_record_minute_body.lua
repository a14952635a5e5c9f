-- The body of record_minute, for both layouts (it names no key and reads no clock):
-- record_minute.lua (asyncq's) and asynq_inspect_record_minute.lua (Go asynq's)
-- document its KEYS, ARGV and reply.
local head = redis.call('LINDEX', KEYS[1], 0)
if head and string.match(head, '^(%d+):') == ARGV[1] then
  return 0
end
local backlog = redis.call('LLEN', KEYS[4]) + redis.call('LLEN', KEYS[5])
  + redis.call('ZCARD', KEYS[6]) + redis.call('ZCARD', KEYS[7])
local processed, failed = redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3])
if not head and backlog == 0 and not processed and not failed then
  -- Nothing to chart yet, or a queue deleted since the caller listed it: no key is created.
  return 0
end
local sample = ARGV[1] .. ':' .. (processed or '0') .. ':' .. (failed or '0') .. ':' .. backlog
redis.call('LPUSH', KEYS[1], sample)
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return 1
