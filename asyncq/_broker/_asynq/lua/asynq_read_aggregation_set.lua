-- asynq_read_aggregation_set: the tasks staged in one aggregation set (read only), as Go's
--   ReadAggregationSet.
-- KEYS[1] set zset           asynq:{q}:g:<group>:<set id>
-- ARGV[1] task key prefix    asynq:{q}:t:
-- Returns: {id1, msg1, asyncq_msg1, ...} in the order the tasks joined the group (asyncq_msg
--   '' for a task Go enqueued); ids whose task hash is gone are skipped.
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local v = redis.pcall('HMGET', ARGV[1] .. id, 'msg', 'asyncq_msg')
  if not v['err'] and v[1] then
    out[#out + 1] = id
    out[#out + 1] = v[1]
    out[#out + 1] = v[2] or ''
  end
end
return out
