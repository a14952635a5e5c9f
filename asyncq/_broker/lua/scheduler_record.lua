-- scheduler_record: remember that a periodic entry enqueued a task (its history, newest kept).
-- KEYS[1] history zset       asyncq:scheduler_history:{<entry id>}
-- ARGV[1] enqueue time, Unix ms (the score)
-- ARGV[2] encoded event (JSON; contains the task id, so it is unique)
-- ARGV[3] most events kept (the oldest are dropped)
-- ARGV[4] TTL in ms, renewed by each event (history of an entry that stopped firing expires)
-- Returns: the number of events kept.
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[3]) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return redis.call('ZCARD', KEYS[1])
