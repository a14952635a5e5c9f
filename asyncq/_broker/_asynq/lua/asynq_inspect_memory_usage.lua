-- asynq_inspect_memory_usage: estimate the memory one queue uses by sampling, as Go's
--   Inspector does (read only).
-- KEYS[1] active list        KEYS[2] pending list
-- KEYS[3] scheduled zset     KEYS[4] retry zset
-- KEYS[5] archived zset      KEYS[6] completed zset
-- KEYS[7] groups set         asynq:{q}:groups
-- ARGV[1] task key prefix    asynq:{q}:t:
-- ARGV[2] tasks sampled per list/zset (Go: 20)
-- ARGV[3] groups sampled (Go: 5)
-- ARGV[4] group key prefix   asynq:{q}:g:
-- Returns: estimated bytes: each list/zset's own MEMORY USAGE plus the mean MEMORY USAGE of
--   up to ARGV[2] of its task hashes times its size; the group tasks are estimated from the
--   first ARGV[3] groups' samples.
-- @include asyncq:_inspect_shared_lib.lua
local sample = tonumber(ARGV[2])

local bytes = 0
for i = 1, 6 do
  local ids, size
  if i <= 2 then
    ids, size = redis.call('LRANGE', KEYS[i], 0, sample - 1), redis.call('LLEN', KEYS[i])
  else
    ids, size = redis.call('ZRANGE', KEYS[i], 0, sample - 1), redis.call('ZCARD', KEYS[i])
  end
  if #ids > 0 then
    local sum = inspect_sampled_usage(ARGV[1], ids)
    bytes = bytes + sum / #ids * size
  end
  bytes = bytes + (redis.call('MEMORY', 'USAGE', KEYS[i]) or 0)
end
local groups = redis.call('SMEMBERS', KEYS[7])
local count, total, n = 0, 0, 0
for i, g in ipairs(groups) do
  local gkey = ARGV[4] .. g
  count = count + redis.call('ZCARD', gkey)
  if i <= tonumber(ARGV[3]) then
    local sum, m = inspect_sampled_usage(ARGV[1], redis.call('ZRANGE', gkey, 0, sample - 1))
    total, n = total + sum, n + m
  end
end
if n > 0 then
  bytes = bytes + total / n * count
end
return math.floor(bytes)
