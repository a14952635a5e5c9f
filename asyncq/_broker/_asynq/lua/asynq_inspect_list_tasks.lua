-- asynq_inspect_list_tasks: one page of the tasks in a list or zset, with their fields (read
--   only), in the range Go's Inspector lists.
-- KEYS[1] source             pending/active list, a state zset, or a group zset
-- KEYS[2] lease zset         asynq:{q}:lease (read for the active list only)
-- ARGV[1] 'list' or 'zset'
-- ARGV[2] start index, ARGV[3] stop index (LRANGE/ZRANGE semantics, inclusive)
-- ARGV[4] task key prefix    asynq:{q}:t:
-- ARGV[5] '1' when the source is the active list (each row carries its lease score)
-- Returns: one row per id that has a task hash, in range order:
--   {id, msg, state, result, score, asyncq_msg, result_enc, started_at, limited} (see
--   _asynq_inspect_lib.lua), score the zset score or the active task's lease (Unix s; false
--   when there is none).
-- @include _asynq_inspect_lib.lua

-- The row of task `id` (asynq_inspect_row), nil when it has no hash.
local function inspect_list_row(prefix, id, score)
  return asynq_inspect_row(prefix, id, score)
end
-- @include asyncq:_inspect_list_tasks_body.lua
