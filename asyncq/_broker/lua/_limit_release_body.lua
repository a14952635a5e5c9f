-- The body of limit_release, for both layouts: limit_release.lua (asyncq's) and
-- _asynq/lua/asynq_limit_release.lua (Go asynq's) document its KEYS, ARGV and reply, and each
-- includes its layout's limit hooks with the wake-up first (_limit_wake_hooks.lua here).
local tprefix = ARGV[2]
local emit = limit_events(KEYS[1])
local woken = 0
for i = 6, #ARGV, 2 do
  local holder, state = ARGV[i], ARGV[i + 1]
  local mine = true
  if ARGV[3] ~= '' then
    local v = redis.call('HMGET', tprefix .. holder, 'state', 'owner')
    mine = not (v[1] == 'active' and v[2] and v[2] ~= ARGV[3])
  end
  if mine and redis.call('ZREM', state .. 'held', holder) == 1 then
    local id = asyncq_limit_wake_next(state, KEYS[2], KEYS[1], tprefix, ARGV[1], 50)
    if id then
      emit(id, 'scheduled', 'pending')
      woken = woken + 1
    end
  end
end
if woken > 0 then
  limit_wake(KEYS[1], ARGV[4], ARGV[5])
end
return woken
