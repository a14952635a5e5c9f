-- asynq_inspect_find_tasks: the tasks of a list or zset whose type and/or last error (read
--   from their TaskMessage) contain the given texts (case-insensitive), examining at most a
--   given number of entries (read only).
-- KEYS[1] source             pending/active list, a state zset, or a group zset
-- KEYS[2] lease zset         asynq:{q}:lease (read for the active list only)
-- ARGV[1] 'list' or 'zset'
-- ARGV[2] position of the first entry examined (0: the oldest, in listing order)
-- ARGV[3] most entries examined by this call
-- ARGV[4] most matches returned
-- ARGV[5] task key prefix    asynq:{q}:t:
-- ARGV[6] text the type must contain, lower-cased ('' any type)
-- ARGV[7] text the last error must contain, lower-cased ('' any error, even none)
-- ARGV[8] '1' when the source is the active list (matches carry their lease score)
-- Returns: {next position (-1: the end was reached), entries examined, matches...}, each
--   match a row as asynq_inspect_list_tasks returns them; the next position follows the last
--   entry examined, so a search resumes there.
-- @include _asynq_inspect_lib.lua
local first = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local ids, scores = {}, {}
if ARGV[1] == 'list' then
  local found = redis.call('LRANGE', KEYS[1], -(first + limit), -(first + 1))
  for i = #found, 1, -1 do
    ids[#ids + 1] = found[i]
  end
else
  local pairs_ = redis.call('ZRANGE', KEYS[1], first, first + limit - 1, 'WITHSCORES')
  for i = 1, #pairs_, 2 do
    ids[#ids + 1] = pairs_[i]
    scores[#ids] = pairs_[i + 1]
  end
end
local function contains(s, part)
  return part == '' or string.find(string.lower(s), part, 1, true) ~= nil
end
local out = {-1, 0}
local examined = 0
for i, id in ipairs(ids) do
  if #out - 2 >= want then
    break
  end
  examined = i
  local msg = redis.call('HGET', ARGV[5] .. id, 'msg')
  if msg and contains(asynq_pb_string(msg, ASYNQ_TYPE), ARGV[6])
      and contains(asynq_pb_string(msg, ASYNQ_ERROR_MSG), ARGV[7]) then
    local score = scores[i]
    if ARGV[8] == '1' then
      score = redis.call('ZSCORE', KEYS[2], id)
    end
    out[#out + 1] = asynq_inspect_row(ARGV[5], id, score)
  end
end
if examined < #ids or #ids == limit then
  out[1] = first + examined
end
out[2] = examined
return out
