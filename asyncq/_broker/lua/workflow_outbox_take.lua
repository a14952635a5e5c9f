#!lua flags=allow-oom
-- workflow_outbox_take: an advancer takes up to N outcome records of a queue's outbox. One
-- advancer drains a queue's outbox at a time (a lock with a time to live, renewed at every
-- take); with nothing left it releases the lock and sets the idle flag in the same step, so a
-- record written after this call publishes a wake-up: none is missed.
-- KEYS[1] outbox hash        asyncq:{q}:wfout
-- KEYS[2] lock               asyncq:{q}:wflock
-- KEYS[3] idle flag          asyncq:{q}:wfidle
-- ARGV[1] advancer id (server id)
-- ARGV[2] lock time to live, ms
-- ARGV[3] most records
-- ARGV[4] idle flag time to live, ms
-- Returns: false the lock is held by another advancer; else {id1, record1, id2, ...}
--   (empty: the outbox is empty, the lock released and the idle flag set).
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then
  return false
end
local got = redis.call('HRANDFIELD', KEYS[1], tonumber(ARGV[3]), 'WITHVALUES')
if #got == 0 then
  if holder then
    redis.call('DEL', KEYS[2])
  end
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
  return got
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return got
