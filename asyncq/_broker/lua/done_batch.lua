#!lua flags=allow-oom
-- done_batch: many tasks of one queue finished and are not kept (done.lua for each, in one
-- call: what a worker's outcome flush writes when handlers returned; the counters are bumped
-- once for all).
-- KEYS[1] active list        asyncq:{q}:active
-- KEYS[2] lease zset         asyncq:{q}:lease
-- KEYS[3] processed total    asyncq:{q}:processed
-- KEYS[4] processed today    asyncq:{q}:processed:<YYYY-MM-DD>
-- KEYS[5] completion marks   asyncq:{q}:marks
-- KEYS[5 + i] task hash of the i-th task, asyncq:{q}:t:<id>
-- ARGV[1] owner ('' = any owner)
-- ARGV[2] daily counter expiry, Unix ms
-- ARGV[3] largest result sent with a completion event, bytes (done.lua's ARGV[7])
-- ARGV[4] now, Unix ms (completed_at of the marks)
-- ARGV[5 + 5 * (i - 1) ...] the i-th task: id, result, its encoding, why it was revoked ('':
--   it succeeded), completion mark ('0' none) — done.lua's ARGV[1], [4], [5], [6] and [8]
-- Returns: one flag per task, as done.lua returns (1 done; 0 no longer leased to the owner).
-- @include _done_lib.lua
local out = {}
local done = 0
for i = 1, #KEYS - 5 do
  local a = 5 + 5 * (i - 1)
  local flag = asyncq_done(KEYS[5 + i], ARGV[a], KEYS[1], KEYS[2], KEYS[5], ARGV[1], ARGV[a + 1],
                           ARGV[a + 2], ARGV[a + 3], ARGV[3], ARGV[a + 4], ARGV[4])
  out[i] = flag
  done = done + flag
end
if done > 0 then
  asyncq_bump(KEYS[3], KEYS[4], ARGV[2], done)
end
return out
