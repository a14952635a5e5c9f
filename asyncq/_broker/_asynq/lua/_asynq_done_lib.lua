-- A finished task that is not kept, as Go's Done, prepended by "-- @include _asynq_done_lib.lua"
-- (it brings _asynq_lib.lua) to asynq_done.lua (one task) and asynq_done_batch.lua (many).
-- @include _asynq_lib.lua

-- Delete task `id` (record `key`) held by `owner`'s run (asynq_held), as asynq_done.lua's
-- header says; `emit` is the queue's event publisher (asynq_events), `base` its key prefix.
-- Returns 1 done, 0 not held (nothing written). The caller counts what was done.
local function asynq_done(key, id, active, lease, base, emit, owner, result, enc, revoked, max,
                          mark, now, keep)
  if not asynq_held(key, lease, id, owner) then
    return 0
  end
  if revoked == '' then
    asynq_completed_event(emit, id, enc, false, result, max)
  else
    emit(id, 'active', 'deleted', {reason = 'revoked', error = revoked})
  end
  asyncq_leave_active(active, id)
  redis.call('ZREM', lease, id)
  asynq_release_lock(key, id)
  redis.call('DEL', key)
  if revoked == '' and mark ~= '0' then
    asynq_mark(base, id, now, keep)
  end
  return 1
end
