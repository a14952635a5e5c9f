#!lua flags=allow-oom
-- workflow_apply: record how steps ended in their workflow's state, and find the steps that
-- may run now. Idempotent: an outcome already recorded changes nothing (it is reported as a
-- replay, so the caller redoes the follow-up work a crash may have cut short).
-- KEYS[1] record             asyncq:{wf:<id>}:t:<id>
-- KEYS[2] successors hash    KEYS[3] counts hash       KEYS[4] node state hash
-- KEYS[5] results hash       KEYS[6] ready set
-- ARGV[1] workflow id
-- ARGV[2] now, Unix ms
-- ARGV[4i-1..4i+2]: outcome i: node, 's' succeeded / 'f' failed / 'c' cancelled, the result's
--   encoding ('j', 'b', '-' none) and the result (or the error)
-- Returns: {workflow state, change, final node done ('1'/'0'), replay ('1'/'0'), node, ...}:
--   change is 'failed', 'cancelled' or 'resumed' when this call made it so, else ''; the
--   nodes are the task nodes that became ready in this call (also recorded in the ready set).
--   {''} when there is no such workflow (it expired or was deleted: nothing to do).
-- A join node (id starting with 'g') has no task: it is done once all its inputs are.
-- @include _lib.lua
local rec = KEYS[1]
local w = redis.call('HMGET', rec, 'wstate', 'final', 'retention')
if not w[1] then
  return {''}
end
local wstate = w[1]
local change = ''
local replay = false
local newly = {}
local live = wstate == 'starting' or wstate == 'running'

local function expire_all(ms)
  for i = 1, #KEYS do
    if ms then redis.call('PEXPIRE', KEYS[i], ms) else redis.call('PERSIST', KEYS[i]) end
  end
end

local function finished(node)
  local stack = {node}
  while #stack > 0 do
    local n = table.remove(stack)
    redis.call('SREM', KEYS[6], n)
    local s = redis.call('HGET', KEYS[2], n)
    if s then
      for succ in string.gmatch(s, '[^,]+') do
        if redis.call('HINCRBY', KEYS[3], succ, -1) == 0 then
          if string.sub(succ, 1, 1) == 'g' then
            redis.call('HSET', KEYS[4], succ, 'd')
            stack[#stack + 1] = succ
          else
            redis.call('SADD', KEYS[6], succ)
            newly[#newly + 1] = succ
          end
        end
      end
    end
  end
end

for i = 3, #ARGV, 4 do
  local node, outcome, enc, body = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local st = redis.call('HGET', KEYS[4], node)
  if outcome == 's' then
    if st == 'd' or st == 'x' then
      replay = true
    else
      redis.call('HSET', KEYS[4], node, 'd')
      redis.call('HSET', KEYS[5], node, enc .. body)
      if st == 'f' and redis.call('HINCRBY', rec, 'nfailed', -1) <= 0
          and wstate == 'failed' then
        -- The failed step succeeded on a re-run: the workflow goes on where it stopped.
        wstate = 'running'
        live = true
        change = 'resumed'
        redis.call('HSET', rec, 'wstate', 'running', 'state', 'active')
        redis.call('HDEL', rec, 'error', 'failed_at', 'failed_node')
        expire_all(nil)
        asyncq_event(rec, ARGV[1], 'archived', 'active')
      end
      finished(node)
    end
  elseif outcome == 'f' then
    if st then
      replay = true
    else
      redis.call('HSET', KEYS[4], node, 'f')
      redis.call('HINCRBY', rec, 'nfailed', 1)
      redis.call('HSET', KEYS[5], node, 'e' .. body)
      if live then
        wstate = 'failed'
        live = false
        change = 'failed'
        redis.call('HSET', rec, 'wstate', 'failed', 'state', 'archived', 'error', body,
          'failed_at', ARGV[2], 'failed_node', node)
        asyncq_event(rec, ARGV[1], 'active', 'archived', {error = body})
        expire_all(tonumber(w[3]))
      end
    end
  else
    if st == 'x' or st == 'd' then
      replay = true
    else
      redis.call('HSET', KEYS[4], node, 'x')
      redis.call('HSET', KEYS[5], node, 'e' .. body)
      if live or wstate == 'failed' then
        local from = live and 'active' or 'archived'
        wstate = 'cancelled'
        live = false
        change = 'cancelled'
        local why = 'workflow cancelled: step ' .. node .. ' ' .. body
        redis.call('HSET', rec, 'wstate', 'cancelled', 'state', 'archived', 'error', why,
          'failed_at', ARGV[2], 'failed_node', node)
        asyncq_event(rec, ARGV[1], from, 'archived', {error = why})
        expire_all(tonumber(w[3]))
      end
    end
  end
end
local final_done = redis.call('HGET', KEYS[4], w[2]) == 'd' and '1' or '0'
local out = {wstate, change, final_done, replay and '1' or '0'}
for _, n in ipairs(newly) do
  out[#out + 1] = n
end
return out
