-- aggregation_check: stage a group's tasks for aggregation when it is ready (group -> set).
-- KEYS[1] group zset         asyncq:{q}:g:<group>
-- KEYS[2] new set zset       asyncq:{q}:g:<group>:<set id>
-- KEYS[3] aggregation sets   asyncq:{q}:aggregation_sets
-- KEYS[4] groups set         asyncq:{q}:groups
-- ARGV[1] now, Unix ms
-- ARGV[2] grace period, ms: ready when the newest task is at least this old
-- ARGV[3] max delay, ms (0: none): ready when the oldest task is at least this old
-- ARGV[4] max size (0: none): ready when the group holds this many; a set takes at most this many
-- ARGV[5] set deadline, Unix ms (after it, an unfinished set returns to its group)
-- ARGV[6] group name
-- ARGV[7] task key prefix    asyncq:{q}:t:
-- ARGV[8] most archived tasks kept (default), ARGV[9] oldest kept, ms of age (default)
-- A task taken whose expiry is not after ARGV[1] is archived instead of staged (asyncq_expire):
-- it would never start.
-- Returns: number of tasks moved into the new set (0: not ready, or every task taken expired;
--   no set is made then).
-- @include _expire_lib.lua

-- Stage the tasks taken (`members`: id, score...) in the new set; a task whose expiry is not
-- after `now` is archived instead (asyncq_expire), and the archive trimmed after. Returns how
-- many were staged.
local function aggregation_stage(members, now)
  local staged = 0
  for i = 1, #members, 2 do
    local id = members[i]
    local key = ARGV[7] .. id
    local msg = redis.pcall('HGET', key, 'msg')
    local expires = type(msg) == 'string' and asyncq_expiry(msg)
    if expires and expires <= now then
      asyncq_expire(key, id, 'aggregating', asyncq_expired_reason(expires), now)
    else
      redis.call('ZADD', KEYS[2], members[i + 1], id)
      staged = staged + 1
    end
  end
  if staged < #members / 2 then
    asyncq_expired_trim(asyncq_base(ARGV[7], 't:'), now, ARGV[8], ARGV[9])
  end
  return staged
end
-- @include _aggregation_check_body.lua
