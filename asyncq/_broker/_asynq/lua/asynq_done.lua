#!lua flags=allow-oom
-- asynq_done: a task succeeded and is not kept (active -> deleted), as Go's Done.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] processed today    asynq:{q}:processed:<YYYY-MM-DD>
-- KEYS[5] processed total    asynq:{q}:processed
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] daily counter expiry, Unix s
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). The
--   task's uniqueness lock (hash field unique_key) is released if the task holds it.
-- @include _asynq_lib.lua
if not asynq_held(KEYS[1], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
asynq_release_lock(KEYS[1], ARGV[1])
redis.call('DEL', KEYS[1])
asynq_count(KEYS[4], KEYS[5], ARGV[3])
return 1
