-- The body of inspect_remove_queue, for both layouts: inspect_remove_queue.lua (asyncq's) and
-- asynq_inspect_remove_queue.lua (Go asynq's) document its KEYS, ARGV and reply; each includes
-- its layout's inspector helpers first (inspect_release_lock).
local mode = ARGV[1]
local active = redis.call('LLEN', KEYS[2])
local queued = redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[3])
  + redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[5]) + redis.call('SCARD', KEYS[11])
if mode ~= 'force' then
  for _, set_key in ipairs(redis.call('ZRANGE', KEYS[12], 0, -1)) do
    queued = queued + redis.call('ZCARD', set_key)
  end
end
if active > 0 then
  return {-1, active, queued}
end
if queued > 0 then
  return {-2, active, queued}
end
if mode == 'check' then
  return {1, 0, 0}
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return {-3, 0, 0}
end
for _, set_key in ipairs(redis.call('ZRANGE', KEYS[12], 0, -1)) do
  for _, id in ipairs(redis.call('ZRANGE', set_key, 0, -1)) do
    local key = ARGV[2] .. id
    inspect_release_lock(key, id)
    redis.call('DEL', key)
  end
  redis.call('DEL', set_key)
end
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
for i = 3, #ARGV do
  redis.call('DEL', KEYS[9] .. ':' .. ARGV[i], KEYS[10] .. ':' .. ARGV[i])
end
return {1, 0, 0}
