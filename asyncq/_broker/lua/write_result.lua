-- write_result: store a handler's result in its task.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- ARGV[1] result bytes
-- ARGV[2] its encoding: 'b' bytes, 'j' JSON
-- Returns: the result's length, or -1 when the task no longer exists (nothing is recreated).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('HSET', KEYS[1], 'result', ARGV[1], 'result_enc', ARGV[2])
return string.len(ARGV[1])
