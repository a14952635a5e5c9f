-- The body of inspect_queue_info, for both layouts: inspect_queue_info.lua (asyncq's) and
-- asynq_inspect_queue_info.lua (Go asynq's) document its KEYS, ARGV and reply. KEYS[14] and
-- KEYS[15] are optional: a layout that counts the tasks staged in aggregation sets among the
-- aggregating ones passes its aggregation sets zset, one that counts expired tasks its total.
-- Counters and pending_since come back as stored (strings: a Unix ns exceeds a double).
local out = {
  redis.call('LLEN', KEYS[1]), redis.call('LLEN', KEYS[2]),
  redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4]),
  redis.call('ZCARD', KEYS[5]), redis.call('ZCARD', KEYS[6]),
}
local groups = redis.call('SMEMBERS', KEYS[12])
local aggregating = 0
for _, g in ipairs(groups) do
  aggregating = aggregating + redis.call('ZCARD', ARGV[2] .. g)
end
if KEYS[14] then
  for _, set_key in ipairs(redis.call('ZRANGE', KEYS[14], 0, -1)) do
    aggregating = aggregating + redis.call('ZCARD', set_key)
  end
end
out[#out + 1] = aggregating
out[#out + 1] = #groups
for _, key in ipairs({KEYS[10], KEYS[11], KEYS[8], KEYS[9]}) do
  out[#out + 1] = redis.call('GET', key) or '0'
end
out[#out + 1] = redis.call('EXISTS', KEYS[7])
local since = '0'
if out[1] > 0 then
  local oldest = redis.call('LINDEX', KEYS[1], -1)
  since = redis.call('HGET', ARGV[1] .. oldest, 'pending_since') or '0'
end
out[#out + 1] = since
out[#out + 1] = redis.call('ZCOUNT', KEYS[13], '-inf', ARGV[3])
if KEYS[15] then
  out[#out + 1] = redis.call('GET', KEYS[15]) or '0'
end
return out
