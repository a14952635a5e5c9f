-- asynq_list_lease_expired: find running tasks whose lease ended, as Go's ListLeaseExpired,
--   with two cutoffs: a run an asyncq worker holds (owner set, lease_until equal to its lease
--   score) is listed by the asyncq cutoff; any other run (a Go server's) only by the Go cutoff,
--   Go's own 30 s allowance for clock skew, so a live Go run is never taken.
-- KEYS[1] lease zset         asynq:{q}:lease
-- KEYS[2] active list        asynq:{q}:active
-- ARGV[1] asyncq cutoff, Unix s: an asyncq run whose lease score is at or before it is listed
-- ARGV[2] Go cutoff, Unix s: the same for every other run
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] most tasks to list (at most ten times as many lease entries are examined)
-- Returns: {id1, msg1, asyncq_msg1, id2, ...}: asyncq_msg '' for a task Go enqueued. A lease
--   entry at or before the Go cutoff whose task hash is gone (or is a key of another type), or
--   whose task is no longer active, is stale: removed from the lease zset and the active list,
--   not listed (nothing else would ever clear it).
local asyncq_cutoff, go_cutoff = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit = tonumber(ARGV[4])
local upto = math.max(asyncq_cutoff, go_cutoff)
local out, found, offset, examined = {}, 0, 0, 0
while found < limit and examined < 10 * limit do
  local entries = redis.call('ZRANGE', KEYS[1], '-inf', upto, 'BYSCORE', 'LIMIT', offset, limit,
    'WITHSCORES')
  if #entries == 0 then break end
  local removed = 0
  for i = 1, #entries, 2 do
    local id, score = entries[i], tonumber(entries[i + 1])
    examined = examined + 1
    local v = redis.pcall('HMGET', ARGV[3] .. id, 'msg', 'asyncq_msg', 'state', 'owner',
      'lease_until')
    if v['err'] or not v[1] or v[3] ~= 'active' then
      if score <= go_cutoff then
        redis.call('ZREM', KEYS[1], id)
        redis.call('LREM', KEYS[2], 0, id)
        removed = removed + 1
      end
    else
      local held = v[4] and v[5] and tonumber(v[5]) == score
      if score <= (held and asyncq_cutoff or go_cutoff) and found < limit then
        out[#out + 1] = id
        out[#out + 1] = v[1]
        out[#out + 1] = v[2] or ''
        found = found + 1
      end
    end
  end
  offset = offset + #entries / 2 - removed
end
return out
