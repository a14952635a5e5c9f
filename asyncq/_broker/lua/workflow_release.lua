#!lua flags=allow-oom
-- workflow_release: waiting workflow steps whose inputs are done become pending, with their
-- input (waiting -> pending). Only a waiting step is released, so releasing a step twice (an
-- advancer that crashed and is replayed) never runs it twice: a step that is pending, running,
-- finished or gone is left as it is.
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] waiters flag       asyncq:{q}:waiters
-- KEYS[i+2] task hash        asyncq:{q}:t:<id of step i>   (i = 1..n)
-- ARGV[1] now, Unix ms (pending_since)
-- ARGV[2] wake channel
-- ARGV[3] queue name
-- ARGV[3i+1..3i+3]: step i's id, its input (JSON for an argument; as stored for a payload),
--   and the input's encoding ('j', 'b'; '-' no input)
-- Returns: one flag per step: 1 released, 0 not waiting (nothing done).
-- @include _wake_lib.lua
local out = {}
local emit = asyncq_events(KEYS[1], 'pending')
local pushed = false
for i = 1, #KEYS - 2 do
  local key = KEYS[i + 2]
  local id, input, enc = ARGV[3 * i + 1], ARGV[3 * i + 2], ARGV[3 * i + 3]
  local v = redis.call('HMGET', key, 'state', 'wfin', 'payload', 'msg')
  if v[1] ~= 'waiting' then
    out[i] = 0
  else
    local mode = v[2] or ''
    if enc ~= '-' and mode == 'r' then
      redis.call('HSET', key, 'payload', input,
        'msg', (string.gsub(v[4], '"enc":"n"', '"enc":"' .. enc .. '"', 1)))
    elseif enc ~= '-' and mode ~= '' then
      -- A typed step: its input becomes the argument named `mode` (a JSON string).
      local rest = v[3] or '{}'
      if rest == '{}' or rest == '' then
        rest = '}'
      else
        rest = ',' .. string.sub(rest, 2)
      end
      redis.call('HSET', key, 'payload', '{' .. mode .. ':' .. input .. rest)
    end
    redis.call('HDEL', key, 'wfin')
    redis.call('HSET', key, 'state', 'pending', 'pending_since', ARGV[1])
    redis.call('PERSIST', key)
    redis.call('LPUSH', KEYS[1], id)
    pushed = true
    emit(id, 'waiting', 'pending')
    out[i] = 1
  end
end
if pushed then
  asyncq_wake(KEYS[2], ARGV[2], ARGV[3])
end
return out
