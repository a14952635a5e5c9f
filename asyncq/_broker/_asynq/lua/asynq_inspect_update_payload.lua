-- asynq_inspect_update_payload: replace the payload of a scheduled task (scheduled ->
--   scheduled), as Go's UpdateTaskPayload: the TaskMessage's payload field rewritten, every
--   other field (and every other hash field) kept.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- ARGV[1] the TaskMessage read before: the update applies only if it is still the same
-- ARGV[2] the asyncq message read before ('' none): likewise
-- ARGV[3] new payload bytes
-- ARGV[4] new asyncq message (JSON, its payload encoding may differ; '' leaves none)
-- Returns: 1 updated; 0 no such task; -1 the task is not scheduled; -2 the task changed since
--   it was read (read it again and retry).
-- @include _asynq_inspect_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'msg', 'asyncq_msg')
if not v[1] then
  return 0
end
if v[1] ~= 'scheduled' then
  return -1
end
if v[2] ~= ARGV[1] or (v[3] or '') ~= ARGV[2] then
  return -2
end
redis.call('HSET', KEYS[1], 'msg', asynq_pb_edit(v[2], {[ASYNQ_PAYLOAD] = ARGV[3]}))
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'asyncq_msg', ARGV[4])
else
  redis.call('HDEL', KEYS[1], 'asyncq_msg')
end
return 1
