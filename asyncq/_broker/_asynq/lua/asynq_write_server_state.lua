#!lua flags=allow-oom
-- asynq_write_server_state: publish an asyncq worker's state the way Go's heartbeater does
--   (rdb.go WriteServerState): the protobuf ServerInfo with a TTL, its running tasks rewritten
--   as a hash of protobuf WorkerInfo records with the same TTL; plus asyncq's own state
--   document, which Go never reads. The caller adds the keys to asynq:servers and
--   asynq:workers (their own slots) scored by the expiry.
-- KEYS[1] server info        asynq:servers:{<host>:<pid>:<server id>}
-- KEYS[2] workers hash       asynq:workers:{<host>:<pid>:<server id>}
-- KEYS[3] asyncq document    asynq:servers:{<host>:<pid>:<server id>}:asyncq
-- ARGV[1] TTL, whole seconds
-- ARGV[2] ServerInfo (protobuf)
-- ARGV[3] asyncq's state document (JSON)
-- ARGV[4..] pairs of task id, WorkerInfo (protobuf)
-- Returns: 1.
-- Allowed when Redis is full (allow-oom): it replaces bounded keys of this worker, and without
-- them operators would take the worker for gone.
redis.call('SETEX', KEYS[1], ARGV[1], ARGV[2])
redis.call('SETEX', KEYS[3], ARGV[1], ARGV[3])
redis.call('DEL', KEYS[2])
for i = 4, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
