-- inspect_update_payload: replace the payload of a scheduled task (scheduled -> scheduled).
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- ARGV[1] message read before (JSON): the update applies only if it is still the same
-- ARGV[2] new message (JSON; its payload encoding may differ)
-- ARGV[3] new payload bytes
-- Returns: 1 updated; 0 no such task; -1 the task is not scheduled; -2 the message changed
--   since it was read (read it again and retry).
local v = redis.call('HMGET', KEYS[1], 'state', 'msg')
if not v[1] then
  return 0
end
if v[1] ~= 'scheduled' then
  return -1
end
if v[2] ~= ARGV[1] then
  return -2
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'payload', ARGV[3])
return 1
