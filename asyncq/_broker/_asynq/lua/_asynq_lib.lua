-- Helpers shared by the wire=asynq scripts (included, never run on their own).
-- Protobuf: a TaskMessage is read and rewritten field by field at its top level (no nested
-- message is ever edited), so Go readers see the message Go itself would have written.

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

-- Count one more: the daily counter (expiring at `expire_at`, Unix s, from its first count)
-- and the total (back to 1 past int64's maximum, as Go does).
local function asynq_count(day_key, total_key, expire_at)
  if redis.call('INCR', day_key) == 1 then
    redis.call('EXPIREAT', day_key, expire_at)
  end
  if redis.call('GET', total_key) == '9223372036854775807' then
    redis.call('SET', total_key, 1)
  else
    redis.call('INCR', total_key)
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
