-- The limit hooks of asyncq's layout (_limit_hooks.lua) for the scripts that wake waiting tasks
-- (limit_set, limit_release), with the wake-up they end with: kept apart so that the other
-- limit scripts do not carry the pickup code (_wake_lib.lua).
-- @include _wake_lib.lua
-- @include _limit_hooks.lua

-- Tasks became pending in the queue of `pending_key`: hand them to idle workers or wake them.
local function limit_wake(pending_key, channel, queue)
  asyncq_wake(asyncq_base(pending_key, 'pending') .. 'waiters', channel, queue)
end
