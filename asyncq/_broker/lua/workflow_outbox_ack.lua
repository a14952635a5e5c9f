#!lua flags=allow-oom
-- workflow_outbox_ack: delete outbox records once applied (only if unchanged: a step re-run
-- meanwhile wrote a newer record, which stays to be applied).
-- KEYS[1] outbox hash        asyncq:{q}:wfout
-- ARGV[2i-1], ARGV[2i]: step id and the record as taken
-- Returns: how many records were deleted.
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
