-- inspect_archive_limits: set (or reset) a queue's archive caps, and trim the archive to them,
--   one batch per call.
-- KEYS[1] archive limits     asyncq:{q}:archive_limits
-- KEYS[2] archived zset      asyncq:{q}:archived
-- ARGV[1] 'set' (write ARGV[2]/[3], then trim) or 'trim' (trim only: the next batch)
-- ARGV[2] most archived tasks kept ('' = the default)
-- ARGV[3] age limit, ms ('' = the default)
-- ARGV[4] default most archived tasks kept
-- ARGV[5] default oldest archive entry kept, Unix ms
-- ARGV[6] now, Unix ms
-- ARGV[7] task key prefix    asyncq:{q}:t:
-- ARGV[8] most entries deleted by this call
-- Returns: how many archived tasks were deleted (their hashes too, their locks released);
--   call again with 'trim' while it returns ARGV[8].
-- @include _lib.lua
if ARGV[1] == 'set' then
  for _, field in ipairs({{'max_size', ARGV[2]}, {'max_age_ms', ARGV[3]}}) do
    if field[2] == '' then
      redis.call('HDEL', KEYS[1], field[1])
    else
      redis.call('HSET', KEYS[1], field[1], field[2])
    end
  end
end
local max_size, oldest = asyncq_archive_limits(KEYS[1], ARGV[4], ARGV[5], ARGV[6])
return asyncq_trim_archive(KEYS[2], ARGV[7], oldest, max_size, tonumber(ARGV[8]))
