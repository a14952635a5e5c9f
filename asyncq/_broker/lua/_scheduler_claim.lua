-- Shared prologue of the scheduler_<store>.lua scripts and, with the shared-include prefix,
-- of Go asynq's layout's asynq_sched_<store>.lua, included before the store script (it names
-- no key and reads no clock: the caller passes the ticks key and the times).
-- Claims one firing (entry id, tick) of a periodic entry, or returns 2 when it was taken.
-- It reads only the LAST key and the LAST THREE arguments, so the store script that follows
-- keeps its own KEYS/ARGV numbering untouched:
-- KEYS[#KEYS]    scheduler ticks zset  asyncq:{q}:scheduler_ticks  (entry id -> last tick ms;
--                Go's layout has its own, which Go ignores)
-- ARGV[#ARGV-2]  entry id
-- ARGV[#ARGV-1]  tick, Unix ms (computed from the schedule, the same on every replica)
-- ARGV[#ARGV]    prune bound, Unix ms: claims of older ticks are forgotten
-- A tick is claimed only if it is newer than the entry's last claimed tick, so a replica whose
-- clock lags can neither enqueue a tick again nor an older one after a newer one was enqueued.
local sched_ticks = KEYS[#KEYS]
local sched_entry = ARGV[#ARGV - 2]
local sched_tick = tonumber(ARGV[#ARGV - 1])
redis.call('ZREMRANGEBYSCORE', sched_ticks, '-inf', '(' .. ARGV[#ARGV])
local sched_last = redis.call('ZSCORE', sched_ticks, sched_entry)
if sched_last and tonumber(sched_last) >= sched_tick then
  return 2
end
redis.call('ZADD', sched_ticks, sched_tick, sched_entry)
