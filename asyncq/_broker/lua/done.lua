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
-- @include _wf_lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'unique_key', 'wf')
if not asyncq_owned(v[1], v[2], ARGV[2]) then
  return 0
end
if ARGV[6] == '' then
  asyncq_completed_event(KEYS[1], ARGV[1], 'active', ARGV[5], false, ARGV[4],
                         asyncq_result_too_big(ARGV[4], ARGV[7]))
else
  asyncq_event(KEYS[1], ARGV[1], 'active', 'deleted', {reason = 'revoked', error = ARGV[6]})
end
if v[4] then
  if ARGV[6] == '' then
    asyncq_wf_out(KEYS[1], ARGV[1], v[4], 's', ARGV[5] == '' and '-' or ARGV[5], ARGV[4])
  else
    asyncq_wf_out(KEYS[1], ARGV[1], v[4], 'c', '-', 'revoked: ' .. ARGV[6])
  end
end
asyncq_leave_active(KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
asyncq_release_unique(v[3], ARGV[1])
redis.call('DEL', KEYS[1])
if ARGV[6] == '' and ARGV[8] ~= '0' then
  redis.call('ZADD', KEYS[6], ARGV[9], ARGV[1])
end
asyncq_bump(KEYS[4], KEYS[5], ARGV[3])
return 1
