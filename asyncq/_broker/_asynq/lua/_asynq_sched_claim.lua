-- Prologue of the asynq_sched_<store>.lua scripts (included before the asynq store script):
-- claims one firing (entry id, tick) of a periodic entry, or returns 2 when it was taken.
-- Reads only the LAST key and the LAST THREE arguments, so the store script that follows
-- keeps its own KEYS/ARGV numbering:
-- KEYS[#KEYS]    scheduler ticks zset  asynq:{q}:asyncq:scheduler_ticks (entry id -> last tick)
-- ARGV[#ARGV-2]  entry id
-- ARGV[#ARGV-1]  tick, Unix ms (computed from the schedule: the same on every replica)
-- ARGV[#ARGV]    prune bound, Unix ms: claims of older ticks are forgotten
-- A tick is claimed only when newer than the entry's last claimed one: a replica whose clock
-- lags can neither enqueue a tick again nor an older one after a newer one. Go ignores the key.
local claim_ticks = KEYS[#KEYS]
local claim_entry = ARGV[#ARGV - 2]
local claim_tick = tonumber(ARGV[#ARGV - 1])
redis.call('ZREMRANGEBYSCORE', claim_ticks, '-inf', '(' .. ARGV[#ARGV])
local claim_last = redis.call('ZSCORE', claim_ticks, claim_entry)
if claim_last and tonumber(claim_last) >= claim_tick then
  return 2
end
redis.call('ZADD', claim_ticks, claim_tick, claim_entry)
