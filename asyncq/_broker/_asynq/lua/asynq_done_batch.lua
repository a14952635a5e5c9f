#!lua flags=allow-oom
-- asynq_done_batch: many tasks of one queue succeeded and are not kept: asynq_done.lua for each,
--   in one call (what an asyncq worker's outcome flush writes); the counters count them once.
-- KEYS[1] active list        asynq:{q}:active
-- KEYS[2] lease zset         asynq:{q}:lease
-- KEYS[3] processed today    asynq:{q}:processed:<YYYY-MM-DD>
-- KEYS[4] processed total    asynq:{q}:processed
-- KEYS[5] completion marks   asynq:{q}:asyncq:marks (asyncq only)
-- KEYS[5 + i] task hash of the i-th task, asynq:{q}:t:<id>
-- ARGV[1] owner
-- ARGV[2] daily counter expiry, Unix s
-- ARGV[3] largest result sent with a completion event, bytes
-- ARGV[4] now, Unix ms (completed_at of the marks)
-- ARGV[5] how long a mark is kept, ms
-- ARGV[6 + 5 * (i - 1) ...] the i-th task: id, result, its encoding, why it was revoked ('':
--   it succeeded), completion mark ('0' none) — asynq_done.lua's ARGV[1], [4], [5], [6], [8]
-- Returns: one flag per task, as asynq_done.lua returns (1 written, 0 not held by owner).
-- @include _asynq_done_lib.lua
local base = asynq_base(KEYS[1], 'active')
local emit = asynq_events(base)
local out = {}
local done = 0
for i = 1, #KEYS - 5 do
  local a = 6 + 5 * (i - 1)
  local flag = asynq_done(KEYS[5 + i], ARGV[a], KEYS[1], KEYS[2], base, emit, ARGV[1],
                          ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[3], ARGV[a + 4], ARGV[4],
                          ARGV[5])
  out[i] = flag
  done = done + flag
end
if done > 0 then
  asynq_count(KEYS[3], KEYS[4], ARGV[2], done)
end
return out
