-- Limit helpers, included by asyncq's limit scripts and by those over Go asynq's layout (which
-- name this file with the shared-include prefix of _asynq/_scripts.py): they build no key name
-- and read no clock, so one copy serves both layouts (each passes its keys and its units).

-- The size in force of each limit key of a claim call, by the ARGV position of its first
-- field (the 9-field groups of limit_acquire.lua, `count` of them from ARGV[first]): {n,
-- period ms, burst}. A value set at run time (the registry's field 'o:' .. the limit's field)
-- wins over the declared one; a queue's cap ('q') has no declared value, so a queue without
-- one has no entry.
local function asyncq_limits_in_force(registry, first, count)
  local force = {}
  for j = first, first - 1 + count * 9, 9 do
    local set = redis.call('HGET', registry, 'o:' .. ARGV[j + 1])
    local n, period, burst
    if set and ARGV[j] == 'r' then
      n, period, burst = string.match(set, '^(%d+)/(%d+)/(%d+)$')
    elseif set then
      n = string.match(set, '^(%d+)$')
    end
    if n then
      force[j] = {tonumber(n), tonumber(period or 0), tonumber(burst or 0)}
    elseif ARGV[j] ~= 'q' then
      force[j] = {tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7]), tonumber(ARGV[j + 8])}
    end
  end
  return force
end

-- Wake the next task waiting in line for the limit key whose state prefix is `state`
-- (<state>wait): scheduled -> pending (pushed where the next dequeue takes from), its
-- pending_since set to `since`. Waiters no longer deferred (deleted, run by hand, forwarded at
-- their fallback time) and manual holds are dropped from the line on the way, at most `tries`
-- of them in all (nil: no bound). Returns the id woken, or nil when none was.
local function asyncq_limit_wake_next(state, scheduled, pending, tprefix, since, tries)
  local left = tries or -1
  while left ~= 0 do
    left = left - 1
    local id = redis.call('ZPOPMIN', state .. 'wait')[1]
    if not id then
      return nil
    end
    if string.sub(id, 1, 2) ~= 'm:' and redis.call('ZSCORE', scheduled, id)
        and redis.call('HGET', tprefix .. id, 'state') == 'scheduled' then
      redis.call('ZREM', scheduled, id)
      redis.call('RPUSH', pending, id)
      redis.call('HSET', tprefix .. id, 'state', 'pending', 'pending_since', since)
      return id
    end
  end
  return nil
end
