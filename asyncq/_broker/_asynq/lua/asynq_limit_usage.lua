-- asynq_limit_usage: how much of each key of some limits is in use (asyncq's limit_usage.lua
--   over asynq's layout, whose leases are scored in Unix seconds); a key whose state is all
--   gone (nothing held, waiting or in its window) leaves its limit's key set.
-- KEYS[1] lease zset         asynq:{q}:lease  (Unix s)
-- ARGV[1] now, Unix ms (lease ends are compared with it; rate windows use the server's clock)
-- ARGV[2...] 5 fields per key: kind ('c' or 'r'), state prefix of the key, period ms (rate;
--   '0' else), the limit's key set, the key value
-- Returns: per key {in use, waiting}: live slot holders (their lease or manual hold has not
--   ended), or starts in the current window; and tasks deferred in its line.
local now = tonumber(ARGV[1])
local t = redis.call('TIME')
local rnow = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
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
        local lease = redis.call('ZSCORE', KEYS[1], m)
        e = lease and tonumber(lease) * 1000 + 999 or -1
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
