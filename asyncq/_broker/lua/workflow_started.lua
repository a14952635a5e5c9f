-- workflow_started: every step of a new workflow is stored (starting -> running).
-- KEYS[1] record             asyncq:{wf:<id>}:t:<id>
-- ARGV[1] workflow id
-- Returns: the workflow's state now ('running', or what a fast step already made it:
--   'failed', 'cancelled', 'succeeded'); '' when there is no such workflow.
-- @include _lib.lua
local v = redis.call('HMGET', KEYS[1], 'wstate')
if not v[1] then
  return ''
end
if v[1] == 'starting' then
  redis.call('HSET', KEYS[1], 'wstate', 'running', 'state', 'active')
  asyncq_event(KEYS[1], ARGV[1], 'pending', 'active')
  return 'running'
end
return v[1]
