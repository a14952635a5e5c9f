-- inspect_run_all: run one batch of the tasks in a state now
--   (scheduled/retry/archived/completed/aggregating -> pending).
-- KEYS[1] source             the scheduled/retry/archived/completed zset, or a group zset
--                            asyncq:{q}:g:<group> for aggregating tasks
-- KEYS[2] pending list       asyncq:{q}:pending
-- KEYS[3] groups set         asyncq:{q}:groups
-- KEYS[4] waiters flag       asyncq:{q}:waiters
-- ARGV[1] state of the source
-- ARGV[2] batch size: most ids taken from the source by this call
-- ARGV[3] task key prefix    asyncq:{q}:t:
-- ARGV[4] group name (aggregating only, else '')
-- ARGV[5] now, Unix ms (becomes pending_since)
-- ARGV[6] wake channel
-- ARGV[7] queue name
-- Returns: {ids taken from the source, tasks made pending}. Call again while ids == batch size.
-- Tasks join the end of the line in source order (lowest score runs first). Ids without a task
-- hash, or whose hash is in another state, are dropped from the source. A task made pending
-- loses its previous run's progress report (the run asked for has reported nothing yet).
-- @include _wake_lib.lua
-- @include _inspect_lib.lua
local ids = inspect_take(KEYS[1], false, tonumber(ARGV[2]))
local emit = asyncq_events(ARGV[3], 't:')
local moved = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  if redis.call('HGET', key, 'state') == ARGV[1] then
    redis.call('LPUSH', KEYS[2], id)
    redis.call('HSET', key, 'state', 'pending', 'pending_since', ARGV[5])
    redis.call('HDEL', key, 'completed_at', 'progress', 'progress_run')
    emit(id, ARGV[1], 'pending')
    moved = moved + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[3], ARGV[4])
if moved > 0 then
  asyncq_wake(KEYS[4], ARGV[6], ARGV[7])
end
return {#ids, moved}
