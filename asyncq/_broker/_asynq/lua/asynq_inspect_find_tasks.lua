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

-- The TaskMessage of task `id` when its type and last error contain the texts asked, else nil.
local function inspect_match(prefix, id, type_part, error_part)
  local msg = redis.call('HGET', prefix .. id, 'msg')
  if msg and inspect_contains(asynq_pb_string(msg, ASYNQ_TYPE), type_part)
      and (inspect_contains(asynq_pb_string(msg, ASYNQ_ERROR_MSG), error_part)
        or inspect_contains(redis.call('HGET', prefix .. id, 'error') or '', error_part)) then
    return msg
  end
  return nil
end

-- A match as a row of asynq_inspect_list_tasks (read again whole).
local function inspect_found_row(prefix, id, msg, score)
  return asynq_inspect_row(prefix, id, score)
end
-- @include asyncq:_inspect_find_tasks_body.lua
