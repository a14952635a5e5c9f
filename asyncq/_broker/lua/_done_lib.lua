-- A finished task that is not kept, prepended by "-- @include _done_lib.lua" (it brings
-- _wf_lib.lua and so _lib.lua) to done.lua (one task) and done_batch.lua (a flush's worth).
-- @include _wf_lib.lua

-- Delete task `id` (record `task_key`) that finished while leased to `owner` ('' = any):
-- its completion event (or, with `revoked` set, its revocation), its workflow outbox record,
-- its uniqueness lock, its places in the active list and lease zset; a task that succeeded
-- with `mark` ~= '0' leaves a completion mark (id -> `now`) in `marks`. `result` travels only
-- with the event (too big: > `max` bytes, only to a workflow's outbox). Returns 1 done, 0
-- the task is no longer active under `owner` (lease lost: nothing changed). The caller bumps
-- the processed counters.
local function asyncq_done(task_key, id, active, lease, marks, owner, result, enc, revoked,
                           max, mark, now)
  local v = redis.call('HMGET', task_key, 'state', 'owner', 'unique_key', 'wf')
  if not asyncq_owned(v[1], v[2], owner) then
    return 0
  end
  if revoked == '' then
    asyncq_completed_event(task_key, id, 'active', enc, false, result,
                           asyncq_result_too_big(result, max))
  else
    asyncq_event(task_key, id, 'active', 'deleted', {reason = 'revoked', error = revoked})
  end
  if v[4] then
    if revoked == '' then
      asyncq_wf_out(task_key, id, v[4], 's', enc == '' and '-' or enc, result)
    else
      asyncq_wf_out(task_key, id, v[4], 'c', '-', 'revoked: ' .. revoked)
    end
  end
  asyncq_leave_active(active, id)
  redis.call('ZREM', lease, id)
  asyncq_release_unique(v[3], id)
  redis.call('DEL', task_key)
  if revoked == '' and mark ~= '0' then
    redis.call('ZADD', marks, now, id)
  end
  return 1
end
