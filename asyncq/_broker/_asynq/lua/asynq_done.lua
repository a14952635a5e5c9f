#!lua flags=allow-oom
-- asynq_done: a task succeeded and is not kept (active -> deleted), as Go's Done; also used for
--   RevokeTask.
-- KEYS[1] task hash          asynq:{q}:t:<id>
-- KEYS[2] active list        asynq:{q}:active
-- KEYS[3] lease zset         asynq:{q}:lease
-- KEYS[4] processed today    asynq:{q}:processed:<YYYY-MM-DD>
-- KEYS[5] processed total    asynq:{q}:processed
-- KEYS[6] completion marks   asynq:{q}:asyncq:marks (asyncq only)
-- ARGV[1] task id
-- ARGV[2] owner
-- ARGV[3] daily counter expiry, Unix s
-- ARGV[4] the handler's result ('' none), sent only with the completion event (not stored)
-- ARGV[5] its encoding: 'b' bytes, 'j' JSON ('' none)
-- ARGV[6] '' when the task succeeded; else why it was revoked (the handler raised RevokeTask)
-- ARGV[7] largest result sent with the completion event, bytes (a larger one: the event says so)
-- ARGV[8] completion mark ('0' none, else '1'): a task that succeeded returning nothing is
--   added to KEYS[6] for ARGV[10] ms (asynq_mark), so a wait that starts after it ended still
--   finds that it succeeded. Go keeps nothing of such a task; the mark is in a key Go ignores.
-- ARGV[9] now, Unix ms (completed_at of the mark)
-- ARGV[10] how long a mark is kept, ms
-- Returns: 1 written, 0 the task is no longer held by owner's run (nothing written). The
--   task's uniqueness lock (hash field unique_key) is released if the task holds it. When
--   somebody listens, publishes active -> completed (with the result) or, revoked,
--   active -> deleted (asyncq only).
-- @include _asynq_done_lib.lua
local base = asynq_base(KEYS[2], 'active')
local done = asynq_done(KEYS[1], ARGV[1], KEYS[2], KEYS[3], base, asynq_events(base), ARGV[2],
                        ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
if done == 1 then
  asynq_count(KEYS[4], KEYS[5], ARGV[3])
end
return done
