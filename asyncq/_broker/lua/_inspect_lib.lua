-- Helpers shared by the inspector scripts, included by "-- @include _inspect_lib.lua": the
-- layout-free ones of _inspect_shared_lib.lua, and _lib.lua's, which they use.
-- Every key is built from prefixes of one queue (asyncq:{q}:...), so a script stays in one slot.
-- @include _lib.lua
-- @include _inspect_shared_lib.lua

-- Release the uniqueness lock task `id` (hash `key`) holds, if it still holds it (the name
-- Go asynq's _asynq_inspect_lib.lua gives its own).
local function inspect_release_lock(key, id)
  asyncq_release_unique(redis.call('HGET', key, 'unique_key'), id)
end
