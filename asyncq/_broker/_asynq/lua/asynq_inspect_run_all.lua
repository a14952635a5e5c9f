-- asynq_inspect_run_all: run one batch of the tasks in a state now
--   (scheduled/retry/archived/completed/aggregating -> pending), as Go's RunAll*Tasks, batch
--   by batch, also setting pending_since.
-- KEYS[1] source             the scheduled/retry/archived/completed zset, or a group zset
--                            asynq:{q}:g:<group> for aggregating tasks
-- KEYS[2] pending list       asynq:{q}:pending
-- KEYS[3] groups set         asynq:{q}:groups
-- ARGV[1] state of the source
-- ARGV[2] batch size: most ids taken from the source by this call
-- ARGV[3] task key prefix    asynq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- ARGV[5] now, Unix ns (pending_since)
-- Returns: {ids taken from the source, tasks made pending}. Call again while ids == batch size.
-- Tasks join the end of the line in source order (lowest score runs first). Ids without a
-- hash, or whose hash is in another state, are dropped from the source.
-- @include _asynq_inspect_lib.lua
local ids = inspect_take(KEYS[1], false, tonumber(ARGV[2]))
local moved = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  if redis.call('HGET', key, 'state') == ARGV[1] then
    asynq_inspect_make_pending(key, id, ARGV[1], KEYS[2], ARGV[5])
    moved = moved + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[3], ARGV[4])
return {#ids, moved}
