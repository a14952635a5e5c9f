-- repair_tasks: put task records that are in no list or sorted set ("orphans": an evicted or
-- deleted list, a restore, a manual edit) back where their state says they belong.
-- KEYS[1] pending list       asyncq:{q}:pending
-- KEYS[2] active list        asyncq:{q}:active
-- KEYS[3] lease zset         asyncq:{q}:lease
-- KEYS[4] scheduled zset     asyncq:{q}:scheduled
-- KEYS[5] retry zset         asyncq:{q}:retry
-- KEYS[6] archived zset      asyncq:{q}:archived
-- KEYS[7] completed zset     asyncq:{q}:completed
-- KEYS[8] groups set         asyncq:{q}:groups
-- KEYS[9] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[10] waiters flag      asyncq:{q}:waiters
-- ARGV[1] task key prefix    asyncq:{q}:t:
-- ARGV[2] group key prefix   asyncq:{q}:g:
-- ARGV[3] now, Unix ms
-- ARGV[4] how far to search the pending list for a pending task (LPOS MAXLEN): a bound on the
--   cost; when the list is longer, a pending task not found in that stretch is left for a
--   later pass ('?')
-- ARGV[5] wake channel
-- ARGV[6] queue name
-- ARGV[7..] task ids
-- Returns: one string per id: '' in place (or no task hash: nothing to do), '?' undecided (a
--   long pending list), else what was done:
--   'pending'     back at the front of the pending list (runs next);
--   'active'      given a lease that ends now, so the recoverer retries it;
--   'scheduled', 'retry'   back in its sorted set, due now;
--   'archived', 'completed'   back in its sorted set ('completed': expiring now);
--   'aggregating' back in its group;
--   'archived:<reason>'   no usable state or message: archived with that reason.
--   A workflow step 'waiting' for the steps before it is in no list by design: left alone.
-- @include _wake_lib.lua
local now = ARGV[3]
local search = tonumber(ARGV[4])
local out = {}
local woke = false

local function in_aggregation_set(group, id)
  local sets = redis.call('ZRANGE', KEYS[9], 0, -1)
  local prefix = ARGV[2] .. group .. ':'
  for _, set_key in ipairs(sets) do
    if string.sub(set_key, 1, string.len(prefix)) == prefix
        and redis.call('ZSCORE', set_key, id) then
      return true
    end
  end
  return false
end

local function archive(key, id, reason)
  redis.call('HSET', key, 'state', 'archived', 'error', reason, 'failed_at', now)
  redis.call('HDEL', key, 'owner', 'pending_since', 'traceback')
  redis.call('ZADD', KEYS[6], now, id)
  return 'archived:' .. reason
end

for i = 7, #ARGV do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local action = ''
  if redis.call('TYPE', key)['ok'] == 'hash' then
    local v = redis.call('HMGET', key, 'state', 'msg', 'group')
    local state = v[1]
    if state == 'pending' then
      if not redis.call('LPOS', KEYS[1], id, 'RANK', -1, 'MAXLEN', search) then
        if redis.call('LLEN', KEYS[1]) > search then
          action = '?'
        elseif not v[2] then
          action = archive(key, id, 'DecodeError: task message is missing')
        else
          redis.call('RPUSH', KEYS[1], id)
          if not redis.call('HGET', key, 'pending_since') then
            redis.call('HSET', key, 'pending_since', now)
          end
          woke = true
          action = 'pending'
        end
      end
    elseif state == 'active' then
      if not redis.call('ZSCORE', KEYS[3], id) and not redis.call('LPOS', KEYS[2], id) then
        redis.call('LPUSH', KEYS[2], id)
        redis.call('ZADD', KEYS[3], now, id)
        action = 'active'
      end
    elseif state == 'scheduled' or state == 'retry' or state == 'archived'
        or state == 'completed' then
      local set = ({scheduled = KEYS[4], retry = KEYS[5], archived = KEYS[6],
                    completed = KEYS[7]})[state]
      if not redis.call('ZSCORE', set, id) then
        redis.call('ZADD', set, now, id)
        action = state
      end
    elseif state == 'aggregating' and v[3] and v[3] ~= '' then
      local group_key = ARGV[2] .. v[3]
      if not redis.call('ZSCORE', group_key, id) and not in_aggregation_set(v[3], id) then
        redis.call('ZADD', group_key, now, id)
        redis.call('SADD', KEYS[8], v[3])
        action = 'aggregating'
      end
    elseif state ~= 'waiting' and not redis.call('ZSCORE', KEYS[6], id) then
      action = archive(key, id, 'orphaned task record with an unknown state ' ..
        tostring(state or '(none)'))
    end
  end
  out[#out + 1] = action
end
if woke then
  asyncq_wake(KEYS[10], ARGV[5], ARGV[6])
end
return out
