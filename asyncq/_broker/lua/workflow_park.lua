#!lua flags=allow-oom
-- workflow_park: the waiting steps of a failed workflow expire with it (unless a re-run of the
-- failed step resumes it first: releasing a step makes it persistent again).
-- KEYS[i] task hash          asyncq:{q}:t:<id of step i>
-- ARGV[1] time to live, ms
-- Returns: how many waiting steps were given the time to live.
local n = 0
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'state') == 'waiting' then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    n = n + 1
  end
end
return n
