-- asynq_inspect_groups: the groups of a queue and how many tasks wait in each, as Go's
--   GroupStats (read only).
-- KEYS[1] groups set         asynq:{q}:groups
-- ARGV[1] group key prefix   asynq:{q}:g:
-- Returns: {group1, size1, group2, size2, ...}.
local out = {}
for _, g in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', ARGV[1] .. g)
end
return out
