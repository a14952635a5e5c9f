-- inspect_memory_usage: estimate the memory one queue uses, by sampling (read only).
-- KEYS[1] pending list       KEYS[2] active list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asyncq:{q}:groups
-- KEYS[8] lease zset         asyncq:{q}:lease
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] tasks sampled per list/zset
-- ARGV[4] groups sampled
-- Returns: estimated bytes: each container's own MEMORY USAGE plus the mean MEMORY USAGE of up
--   to ARGV[3] of its task hashes times its size; groups are estimated from the first ARGV[4].
-- @include _inspect_shared_lib.lua
local sample = tonumber(ARGV[3])

local function usage(key)
  return redis.call('MEMORY', 'USAGE', key) or 0
end

local function estimate(key, ids, size)
  if size == 0 then
    return 0
  end
  local total = usage(key)
  local sum, n = inspect_sampled_usage(ARGV[1], ids)
  if n > 0 then
    total = total + math.floor(sum / n * size)
  end
  return total
end

local bytes = 0
for i = 1, 2 do
  local size = redis.call('LLEN', KEYS[i])
  bytes = bytes + estimate(KEYS[i], redis.call('LRANGE', KEYS[i], 0, sample - 1), size)
end
for i = 3, 6 do
  local size = redis.call('ZCARD', KEYS[i])
  bytes = bytes + estimate(KEYS[i], redis.call('ZRANGE', KEYS[i], 0, sample - 1), size)
end
if redis.call('EXISTS', KEYS[8]) == 1 then
  bytes = bytes + usage(KEYS[8])
end
local groups = redis.call('SMEMBERS', KEYS[7])
if #groups > 0 then
  local sampled, sum = 0, 0
  for i = 1, math.min(#groups, tonumber(ARGV[4])) do
    local gkey = ARGV[2] .. groups[i]
    local size = redis.call('ZCARD', gkey)
    sum = sum + estimate(gkey, redis.call('ZRANGE', gkey, 0, sample - 1), size)
    sampled = sampled + 1
  end
  bytes = bytes + usage(KEYS[7]) + math.floor(sum / sampled * #groups)
end
return bytes
