-- read_aggregation_set: the tasks staged in one aggregation set (read only).
-- KEYS[1] set zset           asyncq:{q}:g:<group>:<set id>
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- Returns: {id1, msg1, payload1, retried1, ...} in the order the tasks joined the group;
--   ids whose task hash is gone are skipped.
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[1] .. id, 'msg', 'payload', 'retried')
  if v[1] then
    out[#out + 1] = id
    out[#out + 1] = v[1]
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
  end
end
return out
