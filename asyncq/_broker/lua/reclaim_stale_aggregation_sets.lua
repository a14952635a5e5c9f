-- reclaim_stale_aggregation_sets: return the tasks of sets whose aggregation never finished
-- (the aggregating worker died) to their groups (set -> group).
-- KEYS[1] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[2] groups set         asyncq:{q}:groups
-- ARGV[1] now, Unix ms
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- Returns: number of sets reclaimed.
local sets = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE')
for _, set_key in ipairs(sets) do
  local rest = string.sub(set_key, string.len(ARGV[2]) + 1)
  local group = string.match(rest, '^(.*):[^:]+$')
  if group then
    local members = redis.call('ZRANGE', set_key, 0, -1, 'WITHSCORES')
    for i = 1, #members, 2 do
      redis.call('ZADD', ARGV[2] .. group, members[i + 1], members[i])
    end
    if #members > 0 then
      redis.call('SADD', KEYS[2], group)
    end
  end
  redis.call('DEL', set_key)
  redis.call('ZREM', KEYS[1], set_key)
end
return #sets
