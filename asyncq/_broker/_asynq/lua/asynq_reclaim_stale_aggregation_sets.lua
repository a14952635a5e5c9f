-- asynq_reclaim_stale_aggregation_sets: return the tasks of sets whose deadline passed (the
--   aggregating server died) to their groups, as Go's ReclaimStaleAggregationSets (the group is
--   the set key without its last segment); unlike Go it also lists the group in the groups
--   set again, so an aggregator sees it before its next task arrives.
-- KEYS[1] aggregation sets   asynq:{q}:aggregation_sets
-- KEYS[2] groups set         asynq:{q}:groups
-- ARGV[1] now, Unix s
-- ARGV[2] group key prefix   asynq:{q}:g:
-- Returns: number of sets reclaimed.
local sets = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE')
for _, set_key in ipairs(sets) do
  local group_key = string.match(set_key, '^(.*):[^:]*$')
  if group_key and string.sub(group_key, 1, #ARGV[2]) == ARGV[2] then
    local members = redis.call('ZRANGE', set_key, 0, -1, 'WITHSCORES')
    for i = 1, #members, 2 do
      redis.call('ZADD', group_key, members[i + 1], members[i])
    end
    if #members > 0 then
      redis.call('SADD', KEYS[2], string.sub(group_key, #ARGV[2] + 1))
    end
  end
  redis.call('DEL', set_key)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return #sets
