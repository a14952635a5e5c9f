-- Workflow helpers, prepended by "-- @include _wf_lib.lua" (it brings _lib.lua, whose
-- asyncq_base they use). A task that is a workflow step, or that a workflow waits for
-- (after=...), carries a 'wf' field: space-separated tokens '<workflow id>#<node>'. Every
-- script that ends such a task also records the outcome in its queue's outbox <base>wfout, in
-- the same atomic step, so the workflow advancer can never miss it; tasks without the field
-- pay one HMGET field.
-- @include _lib.lua

-- Record how task `id` ended: outcome 's' succeeded (body: the result, `enc` its encoding
-- 'j'/'b', '-' none), 'f' failed (body: the error), 'c' cancelled or deleted (body: why).
-- Wakes the queue's advancers when one of them found the outbox empty (the idle flag).
local function asyncq_wf_out(task_key, id, tokens, outcome, enc, body)
  local base = asyncq_base(task_key, 't:' .. id)
  redis.call('HSET', base .. 'wfout', id,
    outcome .. enc .. string.len(tokens) .. '\n' .. tokens .. (body or ''))
  if redis.call('DEL', base .. 'wfidle') == 1 then
    redis.call('PUBLISH', base .. 'wfwake', id)
  end
end
