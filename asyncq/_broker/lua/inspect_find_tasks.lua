-- inspect_find_tasks: the tasks of a list or zset whose type and/or last error contain the
--   given texts (case-insensitive), examining at most a given number of entries (read only).
-- KEYS[1] source             pending/active list, a state zset, or a group zset
-- KEYS[2] lease zset         asyncq:{q}:lease (read for the active list only)
-- ARGV[1] 'list' or 'zset'
-- ARGV[2] position of the first entry examined (0: the oldest, as inspect_list_tasks orders)
-- ARGV[3] most entries examined by this call
-- ARGV[4] most matches returned
-- ARGV[5] task key prefix    asyncq:{q}:t:
-- ARGV[6] text the type must contain, lower-cased ('' any type)
-- ARGV[7] text the last error must contain, lower-cased ('' any error, even none)
-- Returns: {next position (-1: the end was reached), entries examined, matches...}, each
--   match as a row of inspect_list_tasks; the next position follows the last entry examined,
--   so a search resumes there.
local first = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local ids = {}
local scores = {}
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
local function type_of(msg)
  local ok, m = pcall(cjson.decode, msg)
  if ok and type(m) == 'table' and type(m['type']) == 'string' then
    return m['type']
  end
  return ''
end
local out = {-1, 0}
local examined = 0
for i, id in ipairs(ids) do
  if #out - 2 >= want then
    break
  end
  examined = i
  local v = redis.call('HMGET', ARGV[5] .. id, 'msg', 'payload', 'state', 'retried', 'error',
    'failed_at', 'completed_at', 'result', 'result_enc', 'started_at')
  if v[1]
      and (ARGV[6] == '' or string.find(string.lower(type_of(v[1])), ARGV[6], 1, true))
      and (ARGV[7] == '' or string.find(string.lower(v[5] or ''), ARGV[7], 1, true)) then
    local score = scores[i]
    if ARGV[1] == 'list' then
      score = redis.call('ZSCORE', KEYS[2], id) or false
    end
    out[#out + 1] = {id, v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '', v[6] or '0',
                     v[7] or '0', v[8] or false, score, v[9] or '', v[10] or '0'}
  end
end
if examined < #ids or #ids == limit then
  out[1] = first + examined
end
out[2] = examined
return out
