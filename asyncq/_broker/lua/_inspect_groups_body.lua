-- The body of inspect_groups, for both layouts (it names no key and reads no clock):
-- inspect_groups.lua (asyncq's) and asynq_inspect_groups.lua (Go asynq's)
-- document its KEYS, ARGV and reply.
local out = {}
for _, g in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', ARGV[1] .. g)
end
return out
