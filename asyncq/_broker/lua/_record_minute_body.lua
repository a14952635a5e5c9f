-- The body of record_minute, for both layouts (it names no key and reads no clock):
-- record_minute.lua (asyncq's) and asynq_inspect_record_minute.lua (Go asynq's)
-- document its KEYS, ARGV and reply.
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
