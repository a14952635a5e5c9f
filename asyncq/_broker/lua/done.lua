#!lua flags=allow-oom
-- done: a task finished and is not kept (active -> deleted), leaving at most a completion mark
-- (ARGV[8]); also used for RevokeTask.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] processed total    asyncq:{q}:processed
-- KEYS[5] processed today    asyncq:{q}:processed:<YYYY-MM-DD>
-- KEYS[6] completion marks   asyncq:{q}:marks
-- ARGV[1] task id
-- ARGV[2] owner ('' = any owner)
-- ARGV[3] daily counter expiry, Unix ms
-- ARGV[4] the handler's result ('' none), sent only with the event (not stored)
-- ARGV[5] its encoding: 'b' bytes, 'j' JSON ('' none)
-- ARGV[6] '' when the task succeeded; else why it was revoked (the handler raised RevokeTask)
-- ARGV[7] largest result sent with the completion event, bytes: a larger one goes only to a
--   workflow's outbox (see _wf_lib.lua), the event saying it was too big
-- ARGV[8] completion mark ('0' none, else '1'): a task that succeeded returning nothing is
--   added to KEYS[6] (id -> completed_at), so a wait that starts after it ended still finds
--   that it succeeded; the janitor drops marks after a minute (delete_expired_completed.lua).
--   A mark does not hold the id: a new task may take it at once (and is read first).
-- ARGV[9] now, Unix ms (completed_at of the mark)
-- Returns: 1 done; 0 the task is no longer active under this owner (lease lost: no change).
-- @include _done_lib.lua
local done = asyncq_done(KEYS[1], ARGV[1], KEYS[2], KEYS[3], KEYS[6], ARGV[2], ARGV[4], ARGV[5],
                         ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if done == 1 then
  asyncq_bump(KEYS[4], KEYS[5], ARGV[3])
end
return done
