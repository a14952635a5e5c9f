-- progress: store a running task's progress report and publish it as a task event.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- ARGV[1] task id
-- ARGV[2] owner: the worker the task must be active under (its lease)
-- ARGV[3] the report, JSON {"v": fraction, "m": message, "d": data, "at": Unix ms}
-- The report is stored in the hash field 'progress', with 'progress_run' the task's
-- 'started_at' (the run it belongs to: a later run hides it, see inspect_task_info.lua), and
-- published, while somebody listens, as an event active -> active flagged p whose body is the
-- report.
-- Returns: 1 stored; 0 the task is not active under this owner (lease lost: nothing written).
-- @include _lib.lua
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'started_at')
if not asyncq_owned(v[1], v[2], ARGV[2]) or ARGV[2] == '' then
  return 0
end
redis.call('HSET', KEYS[1], 'progress', ARGV[3], 'progress_run', v[3] or '')
asyncq_event(KEYS[1], ARGV[1], 'active', 'active', {p = 1}, ARGV[3])
return 1
