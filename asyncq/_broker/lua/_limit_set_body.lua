-- The body of limit_set, for both layouts: limit_set.lua (asyncq's) and
-- _asynq/lua/asynq_limit_set.lua (Go asynq's) document its KEYS, ARGV and reply, and each
-- includes its layout's limit hooks with the wake-up first (_limit_wake_hooks.lua here).
local field = 'o:' .. ARGV[7]
local previous = redis.call('HGET', KEYS[1], field) or ''
local declared = redis.call('HGET', KEYS[1], ARGV[7]) or ''
if ARGV[8] == '' then
  redis.call('HDEL', KEYS[1], field)
else
  redis.call('HSET', KEYS[1], field, ARGV[8])
end
local value = ARGV[8] ~= '' and ARGV[8] or declared
local n = nil  -- the concurrency size in force now; nil: no limit, or a rate
if ARGV[6] ~= 'r' and value ~= '' then
  n = tonumber(string.match(value, '^(%d+)'))
end
local now = tonumber(ARGV[1])
local tprefix = ARGV[3]
local emit = limit_events(KEYS[3])
local woken = 0

-- Live holders of a key: a manual hold ('m:<id>') until its end, a task until its lease ends.
local function live(held)
  local members = redis.call('ZRANGE', held, 0, -1, 'WITHSCORES')
  local c = 0
  for j = 1, #members, 2 do
    local e
    if string.sub(members[j], 1, 2) == 'm:' then
      e = tonumber(members[j + 1])
    else
      e = limit_lease_end(redis.call('ZSCORE', KEYS[2], members[j])) or -1
    end
    if e >= now then
      c = c + 1
    end
  end
  return c
end

for k = 9, #ARGV do
  local state = ARGV[k]
  local room = 10000  -- no size in force, or a rate: every waiter claims again (at most this)
  if n then
    room = n - live(state .. 'held')
  elseif ARGV[6] == 'r' then
    redis.call('DEL', state .. 'tat')  -- the pace starts again at the new rate
  end
  while room > 0 do
    local id = asyncq_limit_wake_next(state, KEYS[4], KEYS[3], tprefix, ARGV[2])
    if not id then
      break
    end
    emit(id, 'scheduled', 'pending')
    woken = woken + 1
    room = room - 1
  end
end
if woken > 0 then
  limit_wake(KEYS[3], ARGV[4], ARGV[5])
end
return {previous, declared, woken}
