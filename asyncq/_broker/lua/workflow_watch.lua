-- workflow_watch: a workflow waits for a task of any queue (after=...): the task is told to
-- record its outcome for the workflow, atomically with reading its state now.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] completion marks   asyncq:{q}:marks (tasks that succeeded returning nothing)
-- ARGV[2] task id
-- ARGV[1] workflow token     '<workflow id>#<node>'
-- Returns: {'s', result encoding ('-' none), result} it succeeded and kept its result;
--   {'f', error} it is archived (watched: re-running it resumes the workflow);
--   {'w'} it has not finished yet (watched); {'m'} there is no such task.
local v = redis.call('HMGET', KEYS[1], 'state', 'result_enc', 'result', 'error', 'wf')
if not v[1] then
  if redis.call('ZSCORE', KEYS[2], ARGV[2]) then
    return {'s', '-', ''}
  end
  return {'m'}
end
if v[1] == 'completed' then
  return {'s', v[2] or '-', v[3] or ''}
end
local tokens = v[5]
if not tokens or tokens == '' then
  tokens = ARGV[1]
elseif not string.find(' ' .. tokens .. ' ', ' ' .. ARGV[1] .. ' ', 1, true) then
  tokens = tokens .. ' ' .. ARGV[1]
end
redis.call('HSET', KEYS[1], 'wf', tokens)
if v[1] == 'archived' then
  return {'f', v[4] or ''}
end
return {'w'}
