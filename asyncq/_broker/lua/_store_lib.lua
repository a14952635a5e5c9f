-- Storing new tasks, prepended by "-- @include _store_lib.lua" (it brings _lib.lua) to the
-- scripts that store them: enqueue, enqueue_batch, schedule, add_to_group, workflow_store.
-- @include _lib.lua

-- The opening every new task goes through: its id must be free and, when it is unique
-- (`unique_ttl` ms > 0, a string as ARGV has it), it takes its uniqueness lock `lock_key`,
-- recorded in the task as its 'unique_key'. The id is checked first, so that a conflict never
-- leaves a stray lock. Returns 1: write the task; 0 a task with this id exists; -1 a unique
-- duplicate holds the lock (nothing written in either case).
local function asyncq_new_task(task_key, lock_key, id, unique_ttl)
  if redis.call('EXISTS', task_key) == 1 then
    return 0
  end
  local ttl = tonumber(unique_ttl)
  if ttl > 0 then
    if not redis.call('SET', lock_key, id, 'NX', 'PX', ttl) then
      return -1
    end
    redis.call('HSET', task_key, 'unique_key', lock_key)
  end
  return 1
end

-- A task was stored in its queue: set the queue's in-slot registration marker. Returns 3 when
-- the marker was missing (new queue, or deleted since): the caller then adds the queue to the
-- registry asyncq:queues, a key of another slot no script may touch; 1 otherwise.
local function asyncq_stored(marker)
  if redis.call('SET', marker, '1', 'NX') then
    return 3
  end
  return 1
end
