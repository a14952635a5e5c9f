-- asynq_clear_server_state: an asyncq worker stopped; remove its state, as Go's
--   ClearServerState (the caller removes the keys from asynq:servers and asynq:workers).
-- KEYS[1] server info        asynq:servers:{<host>:<pid>:<server id>}
-- KEYS[2] workers hash       asynq:workers:{<host>:<pid>:<server id>}
-- KEYS[3] asyncq document    asynq:servers:{<host>:<pid>:<server id>}:asyncq
-- Returns: number of keys removed.
return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
