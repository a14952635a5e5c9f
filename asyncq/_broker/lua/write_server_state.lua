#!lua flags=allow-oom
-- write_server_state: publish a worker process's state and its running tasks, with a TTL.
-- KEYS[1] server key         asyncq:servers:{<server id>}
-- KEYS[2] workers hash       asyncq:workers:{<server id>}
-- ARGV[1] TTL in ms
-- ARGV[2] encoded server info (JSON)
-- ARGV[3..] pairs of task id, encoded worker info (JSON)
-- Returns: 1.
-- Allowed when Redis is full (allow-oom): it replaces two bounded keys of this worker, and without
-- them an operator would take the worker for gone (see Inspector.recover_task).
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
redis.call('DEL', KEYS[2])
if #ARGV > 2 then
  local args = {}
  for i = 3, #ARGV do
    args[#args + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[2], unpack(args))
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return 1
