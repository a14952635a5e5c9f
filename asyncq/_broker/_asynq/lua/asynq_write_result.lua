-- asynq_write_result: store a running task's result in the field Go's ResultWriter writes
--   (unlike Go, never recreating a hash that is gone).
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- ARGV[1] result bytes
-- ARGV[2] encoding ("b" bytes, "j" JSON), kept in the field result_enc Go ignores
-- Returns: the result's length, -1 when the task no longer exists.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('HSET', KEYS[1], 'result', ARGV[1], 'result_enc', ARGV[2])
return string.len(ARGV[1])
