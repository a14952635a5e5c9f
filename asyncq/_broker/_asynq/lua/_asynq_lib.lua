-- Helpers shared by the wire=asynq scripts (included, never run on their own).
-- Protobuf: a TaskMessage is read and rewritten field by field at its top level (no nested
-- message is ever edited), so Go readers see the message Go itself would have written.
-- @include asyncq:_active_lib.lua
-- @include asyncq:_event_lib.lua
-- @include asyncq:_handoff_lib.lua

-- The varint encoding of a non-negative integer (exact below 2^53, Lua numbers being doubles).
local function asynq_pb_varint(n)
  local out = {}
  repeat
    local b = n % 128
    n = (n - b) / 128
    if n > 0 then b = b + 128 end
    out[#out + 1] = string.char(b)
  until n == 0
  return table.concat(out)
end

-- The varint at `pos` of `s` and the position after it; nil when `s` ends inside it.
local function asynq_pb_read_varint(s, pos)
  local n, mul = 0, 1
  while true do
    local b = string.byte(s, pos)
    if not b then return nil end
    pos = pos + 1
    n = n + (b % 128) * mul
    if b < 128 then return n, pos end
    mul = mul * 128
  end
end

-- The top-level fields of message `s`: a list of {number, encoded bytes, varint value or nil};
-- nil when `s` is no well-formed message.
local function asynq_pb_fields(s)
  local fields = {}
  local pos, len = 1, #s
  while pos <= len do
    local start = pos
    local tag, value
    tag, pos = asynq_pb_read_varint(s, pos)
    if not tag then return nil end
    local wt = tag % 8
    if wt == 0 then
      value, pos = asynq_pb_read_varint(s, pos)
      if not value then return nil end
    elseif wt == 1 then
      pos = pos + 8
    elseif wt == 2 then
      local n
      n, pos = asynq_pb_read_varint(s, pos)
      if not n then return nil end
      pos = pos + n
    elseif wt == 5 then
      pos = pos + 4
    else
      return nil
    end
    if pos > len + 1 then return nil end
    fields[#fields + 1] = {(tag - wt) / 8, string.sub(s, start, pos - 1), value}
  end
  return fields
end

-- The value of varint field `num` of message `s` (0 when absent, as protobuf reads it).
local function asynq_pb_get(s, num)
  local value = 0
  for _, f in ipairs(asynq_pb_fields(s) or {}) do
    if f[1] == num and f[3] then value = f[3] end
  end
  return value
end

-- Message `s` with the fields of `set` replaced: number -> a non-negative integer (a varint
-- field) or a string (a string/bytes field); 0 and '' leave the field out, as proto3 does.
-- A message that cannot be parsed is returned unchanged.
local function asynq_pb_edit(s, set)
  local fields = asynq_pb_fields(s)
  if not fields then return s end
  local out = {}
  for _, f in ipairs(fields) do
    if set[f[1]] == nil then out[#out + 1] = f[2] end
  end
  local nums = {}
  for num in pairs(set) do nums[#nums + 1] = num end
  table.sort(nums)
  for _, num in ipairs(nums) do
    local v = set[num]
    if type(v) == 'string' then
      if v ~= '' then
        out[#out + 1] = asynq_pb_varint(num * 8 + 2) .. asynq_pb_varint(#v) .. v
      end
    elseif v ~= 0 then
      out[#out + 1] = asynq_pb_varint(num * 8) .. asynq_pb_varint(v)
    end
  end
  return table.concat(out)
end

-- TaskMessage field numbers
local ASYNQ_RETRIED, ASYNQ_ERROR_MSG, ASYNQ_LAST_FAILED_AT, ASYNQ_COMPLETED_AT = 6, 7, 11, 13

-- Write a failure into task hash `key` (message `msg`, edited with `set`): Go's error_msg is
-- `go_err` (the message alone, as a Go handler's error reads), asyncq's own fields keep the
-- whole text `err` (with the exception type; also the only place for the reason when `msg`
-- cannot be parsed, so cannot carry one) and the traceback; `state` is the new state.
local function asynq_write_failure(key, msg, set, state, err, go_err, traceback)
  set[ASYNQ_ERROR_MSG] = go_err
  redis.call('HSET', key, 'msg', asynq_pb_edit(msg, set), 'state', state, 'error', err,
    'traceback', traceback)
  redis.call('HDEL', key, 'owner', 'lease_until')
end

-- Count one more (or `n`): the daily counter (expiring at `expire_at`, Unix s, from its first
-- count) and the total (back to 1 past int64's maximum, as Go does).
local function asynq_count(day_key, total_key, expire_at, n)
  n = n or 1
  if redis.call('INCRBY', day_key, n) == n then
    redis.call('EXPIREAT', day_key, expire_at)
  end
  if redis.call('GET', total_key) == '9223372036854775807' then
    redis.call('SET', total_key, n)
  else
    local ok = redis.pcall('INCRBY', total_key, n)
    if type(ok) == 'table' and ok.err then  -- (past the maximum by a batch: start again)
      redis.call('SET', total_key, n)
    end
  end
end

-- Whether task `id` (hash `key`) is active and still held by `owner`'s run: its lease entry is
-- the one that owner last wrote (a Go server that recovered and re-leased it wrote another).
local function asynq_held(key, lease_key, id, owner)
  local v = redis.call('HMGET', key, 'state', 'owner', 'lease_until')
  if v[1] ~= 'active' or v[2] ~= owner or not v[3] then return false end
  local score = redis.call('ZSCORE', lease_key, id)
  return score ~= false and tonumber(score) == tonumber(v[3])
end

-- Release the task's uniqueness lock if the task holds it.
local function asynq_release_lock(key, id)
  local lock = redis.call('HGET', key, 'unique_key')
  if lock and lock ~= '' and redis.call('GET', lock) == id then
    redis.call('DEL', lock)
  end
end

-- asyncq's additions in asynq's layout: task events, wake-ups and one-hop pickup of idle asyncq
-- workers, completion marks. Their keys are the queue's base ('asynq:{q}:') .. 'asyncq:' ..
-- a name (AsyncqExtraKeys in _keys.py): in the queue's slot, never read by Go, each expiring.
-- Go's own scripts publish nothing and wake nobody; asyncq's readers allow for it.

local ASYNQ_TYPE = 1  -- TaskMessage field number of the task type

-- The queue's base from one of its keys, `base .. suffix`.
local function asynq_base(key, suffix)
  return string.sub(key, 1, #key - #suffix)
end

-- The Redis server's clock, Unix ms.
local function asynq_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The value of length-delimited field `num` of message `s` ('' when absent).
local function asynq_pb_string(s, num)
  local value = ''
  for _, f in ipairs(asynq_pb_fields(s) or {}) do
    if f[1] == num and string.byte(f[2], 1) % 8 == 2 then
      local _, pos = asynq_pb_read_varint(f[2], 1)
      local n
      n, pos = asynq_pb_read_varint(f[2], pos)
      value = string.sub(f[2], pos, pos + n - 1)
    end
  end
  return value
end

-- Task events are published only while some process keeps <base>asyncq:listening alive (a
-- Client waiting or streaming events), so a queue nobody watches pays one EXISTS per script.
local function asynq_listening(base)
  return redis.call('EXISTS', base .. 'asyncq:listening') == 1
end

-- Publish one event on the shard channel <base>asyncq:events, in asyncq's event format
-- (event_publish). Type and retry count come from the task's TaskMessage, so call it while the
-- hash exists.
local function asynq_emit(base, id, from, to, extra, body)
  local msg = redis.call('HGET', base .. 't:' .. id, 'msg')
  local head = {id = id, from = from or '', to = to, at = asynq_now_ms(), retried = 0}
  if msg then
    local t = asynq_pb_string(msg, ASYNQ_TYPE)
    if t ~= '' then
      head.type = t
    end
    head.retried = asynq_pb_get(msg, ASYNQ_RETRIED)
  end
  event_publish(base .. 'asyncq:events', head, extra, body)
end

-- A function(id, from, to, extra, body) publishing one event of the queue (asynq_emit), doing
-- nothing when nobody listens (asked once, here).
local function asynq_events(base)
  if not asynq_listening(base) then
    return function() end
  end
  return function(id, from, to, extra, body)
    asynq_emit(base, id, from, to, extra, body)
  end
end

-- The event of a task that completed (`emit` from asynq_events): it carries the result (`renc`
-- its encoding, '' none; `kept` whether the hash keeps it) unless the result is larger than
-- `max` bytes: then the event says so (`big`) and carries none.
local function asynq_completed_event(emit, id, renc, kept, result, max)
  if #result > tonumber(max) then
    emit(id, 'active', 'completed', {renc = renc, kept = kept, big = true})
  else
    emit(id, 'active', 'completed', {renc = renc, kept = kept}, result)
  end
end

-- One-hop pickup. An idle asyncq worker registers in <base>asyncq:idle (ZSET
-- '<lease ms>:<owner>' -> when the registration lapses, Unix ms), see asynq_dequeue.lua. A
-- script that made a task pending hands the queue's next task (the one Go's dequeue would pop:
-- the pending list's right end) to the longest-idle worker: it publishes the task on the
-- worker's shard channel <base>asyncq:to:<owner> ('<id>\n<pending_since ns>\n<lease end ms>\n
-- <length of msg>\n' .. msg .. asyncq_msg) and, only if the worker heard it, leases it exactly
-- as asynq_dequeue.lua does, in this same script: a Go server never sees a task half handed.
-- The hand-off is recorded in <base>asyncq:handoff:<owner> (HASH id ->
-- '<pending_since ns>:<handed at ms>'), which the worker's next dequeue returns, so a message
-- lost in flight costs no lease. A registration nobody listens to (a dead or stopping worker)
-- is dropped and the next one tried. Returns true when a task was handed off. A queue with a
-- concurrency cap (<base>asyncq:limits 'o:q:') hands nothing off: its tasks must claim a slot
-- first, which the worker does for what a dequeue returns (asynq_dequeue.lua marks them).
local function asynq_handoff(base)
  local idle = base .. 'asyncq:idle'
  if redis.call('EXISTS', idle) == 0 then
    return false
  end
  local pending = base .. 'pending'
  local id, key, v = handoff_candidate(base .. 'paused', base .. 'asyncq:limits', pending,
    base .. 't:', 'msg', 'asyncq_msg', 'pending_since')
  if not id then
    return false
  end
  local now = asynq_now_ms()
  return handoff_offer(idle, now, function(lease_ms, owner)
    local until_s = math.floor((now + tonumber(lease_ms)) / 1000)
    local since = v[3] or '0'
    local data = id .. '\n' .. since .. '\n' .. string.format('%d', until_s * 1000) .. '\n'
      .. #v[1] .. '\n' .. v[1] .. (v[2] or '')
    if redis.call('SPUBLISH', base .. 'asyncq:to:' .. owner, data) == 0 then
      return false
    end
    redis.call('LMOVE', pending, base .. 'active', 'RIGHT', 'LEFT')
    redis.call('HDEL', key, 'pending_since')
    redis.call('HSET', key, 'state', 'active', 'owner', owner, 'lease_until', until_s,
      'started_at', string.format('%d', now))
    redis.call('ZADD', base .. 'lease', until_s, id)
    local handed = base .. 'asyncq:handoff:' .. owner
    redis.call('HSET', handed, id, since .. ':' .. string.format('%d', now))
    redis.call('PEXPIRE', handed, lease_ms)
    asynq_events(base)(id, 'pending', 'active')
    return true
  end)
end

-- Tasks became pending: hand them to the queue's idle asyncq workers (asynq_handoff); if some
-- are still pending, wake the idle workers that left the <base>asyncq:waiters flag by
-- publishing `queue` on `channel` (the flag is taken: one wake-up per idle period).
local function asynq_wake(base, channel, queue)
  handoff_wake(asynq_handoff, base, base .. 'pending', base .. 'asyncq:waiters', channel,
    queue)
end

-- A completion mark: task `id` succeeded returning nothing and is not kept, so its hash is
-- deleted as Go deletes it; <base>asyncq:marks (id -> completed at, Unix ms) keeps that it
-- succeeded for `keep_ms`, so a wait that starts after it ended still finds it. Older marks are
-- dropped here and the set expires `keep_ms` after the last one (no janitor needed). A mark
-- does not hold the id: a new task may take it at once (and is read first).
local function asynq_mark(base, id, now_ms, keep_ms)
  local marks = base .. 'asyncq:marks'
  redis.call('ZADD', marks, now_ms, id)
  redis.call('ZREMRANGEBYSCORE', marks, '-inf',
    '(' .. string.format('%d', tonumber(now_ms) - tonumber(keep_ms)))
  redis.call('PEXPIRE', marks, keep_ms)
end
