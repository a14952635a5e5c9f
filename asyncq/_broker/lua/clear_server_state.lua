-- clear_server_state: a worker process stopped; remove its state.
-- KEYS[1] server key         asyncq:servers:{<server id>}
-- KEYS[2] workers hash       asyncq:workers:{<server id>}
-- Returns: number of keys removed.
return redis.call('DEL', KEYS[1], KEYS[2])
