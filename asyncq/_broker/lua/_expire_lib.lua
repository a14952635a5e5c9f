-- Archiving expired tasks, prepended by "-- @include _expire_lib.lua" (it brings _expiry_lib.lua,
-- _wf_lib.lua and _lib.lua) to the scripts that start a task or bring it nearer its start:
-- dequeue, forward, retry, aggregation_check and expire. An expired task is archived with a
-- reason that says "expired" and when, an event (reason 'expired') and a count in <base>expired.
-- @include _expiry_lib.lua
-- @include _wf_lib.lua

-- A Unix-ms time as '2026-05-01T12:00:00.000Z' (days to a civil date: H. Hinnant's algorithm).
local function asyncq_iso_ms(ms)
  ms = math.floor(tonumber(ms))
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', year, month, day,
    math.floor(secs / 3600), math.floor((secs % 3600) / 60), secs % 60, ms % 1000)
end

-- The error an expired task is archived with (the worker writes the same: expired_reason in
-- _model/_rules.py).
local function asyncq_expired_reason(expires)
  return 'expired: not started by its expiry at ' .. asyncq_iso_ms(expires)
end

-- Archive task `id` unrun because it expired: `task_key` its record, `from` the state it
-- leaves (the caller already took it out of that state's list or set), `reason` the error
-- written, `now` Unix ms (failed_at, its archive score). A workflow step's workflow is told it
-- failed. The caller then keeps the archive within its caps, once: asyncq_expired_trim.
local function asyncq_expire(task_key, id, from, reason, now)
  local base = asyncq_base(task_key, 't:' .. id)
  now = tonumber(now)
  redis.call('HDEL', task_key, 'pending_since', 'owner')
  redis.call('HSET', task_key, 'state', 'archived', 'error', reason, 'failed_at', now)
  redis.call('ZADD', base .. 'archived', now, id)
  asyncq_incr(base .. 'expired')
  asyncq_event(task_key, id, from, 'archived', {error = reason, reason = 'expired'})
  local wf = redis.call('HGET', task_key, 'wf')
  if wf then
    asyncq_wf_out(task_key, id, wf, 'f', '-', reason)
  end
end

-- Keep the archive of the queue whose key base is `base` within its caps after tasks expired
-- into it, as archive.lua does: `max_size` and `max_age` (ms) are the default caps (a queue's
-- own caps win), `now` Unix ms.
local function asyncq_expired_trim(base, now, max_size, max_age)
  now = tonumber(now)
  local size, oldest = asyncq_archive_limits(base .. 'archive_limits', max_size,
    string.format('%.0f', now - tonumber(max_age)), now)
  asyncq_trim_archive(base .. 'archived', base .. 't:', oldest, size, 1000)
end
