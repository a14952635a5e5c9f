-- The body of limit_usage, for both layouts: limit_usage.lua (asyncq's) and
-- _asynq/lua/asynq_limit_usage.lua (Go asynq's) document its KEYS, ARGV and reply, and each
-- includes its layout's limit hooks first (_limit_hooks.lua here).
local now = tonumber(ARGV[1])
local rnow = limit_server_ms()
local out = {}
for i = 2, #ARGV, 5 do
  local state = ARGV[i + 1]
  local used = 0
  if ARGV[i] == 'c' then
    local members = redis.call('ZRANGE', state .. 'held', 0, -1, 'WITHSCORES')
    for j = 1, #members, 2 do
      local m = members[j]
      local e
      if string.sub(m, 1, 2) == 'm:' then
        e = tonumber(members[j + 1])
      else
        e = limit_lease_end(redis.call('ZSCORE', KEYS[1], m)) or -1
      end
      if e >= now then
        used = used + 1
      end
    end
  else
    used = redis.call('ZCOUNT', state .. 'win', '(' .. (rnow - tonumber(ARGV[i + 2])), '+inf')
  end
  local waiting = redis.call('ZCARD', state .. 'wait')
  if redis.call('EXISTS', state .. 'held', state .. 'wait', state .. 'win') == 0 then
    redis.call('SREM', ARGV[i + 3], ARGV[i + 4])
  end
  out[#out + 1] = {used, waiting}
end
return out
