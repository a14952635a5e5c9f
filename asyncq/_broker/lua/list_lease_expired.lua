-- list_lease_expired: find running tasks whose lease ended (their worker is gone or stuck).
-- KEYS[1] lease zset         asyncq:{q}:lease
-- KEYS[2] active list        asyncq:{q}:active
-- ARGV[1] cutoff, Unix ms: leases that ended at or before it are listed
-- ARGV[2] task key prefix    asyncq:{q}:t:
-- ARGV[3] most tasks to list
-- Returns: {id1, msg1, payload1, retried1, ...}. Lease entries whose task hash is gone (or is a
--   key of another type), or whose task is no longer active, are stale: they are removed from the lease zset and the active list
--   (repair) and not listed — otherwise no recovery could ever clear them and they would be
--   listed again on every pass.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local v = redis.pcall('HMGET', ARGV[2] .. id, 'msg', 'payload', 'retried', 'state')
  if not v.err and v[1] and v[4] == 'active' then
    out[#out + 1] = id
    out[#out + 1] = v[1]
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('LREM', KEYS[2], 0, id)
  end
end
return out
