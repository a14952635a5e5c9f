-- The body of reclaim_orphans, for both layouts (it builds no key name and reads no clock):
-- reclaim_orphans.lua (asyncq's) and asynq_reclaim_orphans.lua (Go asynq's)
-- document its KEYS, ARGV and reply.
local ids = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = 0
for _, id in ipairs(ids) do
  if not redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZADD', KEYS[2], ARGV[1], id)
    n = n + 1
  end
end
return n
