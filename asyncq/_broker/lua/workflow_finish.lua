#!lua flags=allow-oom
-- workflow_finish: the final node is done: the workflow succeeds with its result
-- (running -> succeeded). Its keys then expire after its retention.
-- KEYS[1] record             KEYS[2..] the workflow's other keys (given the same expiry)
-- ARGV[1] workflow id
-- ARGV[2] now, Unix ms
-- ARGV[3] result encoding ('j' or 'b')
-- ARGV[4] result
-- ARGV[5] largest result sent with the completion event, bytes
-- Returns: 1 finished now; 0 it was not running (finished before, failed, cancelled, gone).
-- @include _lib.lua
local v = redis.call('HMGET', KEYS[1], 'wstate', 'retention')
if v[1] ~= 'running' and v[1] ~= 'starting' then
  return 0
end
local from = v[1] == 'running' and 'active' or 'pending'
redis.call('HSET', KEYS[1], 'wstate', 'succeeded', 'state', 'completed', 'completed_at',
  ARGV[2], 'result', ARGV[4], 'result_enc', ARGV[3])
asyncq_completed_event(KEYS[1], ARGV[1], from, ARGV[3], true, ARGV[4],
  asyncq_result_too_big(ARGV[4], ARGV[5]))
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], v[2])
end
return 1
