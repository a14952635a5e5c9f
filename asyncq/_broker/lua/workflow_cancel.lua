#!lua flags=allow-oom
-- workflow_cancel: cancel a workflow on request (starting/running/failed -> cancelled).
-- KEYS[1] record             KEYS[2..] the workflow's other keys (given the same expiry)
-- ARGV[1] workflow id
-- ARGV[2] now, Unix ms
-- ARGV[3] why
-- Returns: 1 cancelled now; 0 it had already ended (succeeded or cancelled); -1 no such
--   workflow.
-- @include _lib.lua
local v = redis.call('HMGET', KEYS[1], 'wstate', 'retention')
if not v[1] then
  return -1
end
if v[1] == 'succeeded' or v[1] == 'cancelled' then
  return 0
end
local from = ({starting = 'pending', running = 'active'})[v[1]] or 'archived'
redis.call('HSET', KEYS[1], 'wstate', 'cancelled', 'state', 'archived', 'error', ARGV[3],
  'failed_at', ARGV[2])
asyncq_event(KEYS[1], ARGV[1], from, 'archived', {error = ARGV[3]})
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], v[2])
end
return 1
