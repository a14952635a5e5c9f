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
-- ARGV[8] '1' when the source is the active list (matches carry their lease score)
-- Returns: {next position (-1: the end was reached), entries examined, matches...}, each
--   match as a row of inspect_list_tasks; the next position follows the last entry examined,
--   so a search resumes there.
-- @include _inspect_shared_lib.lua

-- The type a JSON message names ('' none).
local function type_of(msg)
  local ok, m = pcall(cjson.decode, msg)
  if ok and type(m) == 'table' and type(m['type']) == 'string' then
    return m['type']
  end
  return ''
end

-- The fields of task `id` a row is built from when its type and last error contain the texts
-- asked (its JSON message's type; its 'error' field), else nil.
local function inspect_match(prefix, id, type_part, error_part)
  local v = redis.call('HMGET', prefix .. id, 'msg', 'payload', 'state', 'retried', 'error',
    'failed_at', 'completed_at', 'result', 'result_enc', 'started_at')
  if not v[1] then
    return nil
  end
  if inspect_contains(v[5] or '', error_part)
      and (type_part == '' or inspect_contains(type_of(v[1]), type_part)) then
    return v
  end
  return nil
end

-- A match as a row of inspect_list_tasks.
local function inspect_found_row(prefix, id, v, score)
  return {id, v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '', v[6] or '0', v[7] or '0',
          v[8] or false, score, v[9] or '', v[10] or '0'}
end
-- @include _inspect_find_tasks_body.lua
