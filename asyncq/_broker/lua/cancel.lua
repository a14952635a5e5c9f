#!lua flags=allow-oom
-- cancel: ask for the cancellation of a running task. A marker key records it, so a worker
-- that misses the pub/sub message (its connection was reconnecting) still sees it on its next
-- lease renewal; the message stays the fast path.
-- KEYS[1] task hash          asyncq:{q}:t:<id>
-- KEYS[2] cancel marker      asyncq:{q}:cancel:<id>
-- ARGV[1] task id
-- ARGV[2] marker TTL, ms
-- ARGV[3] cancel channel
-- Returns: 1 the task is active: marker written and message published; 0 it is not active
--   (nothing written: a later run of the task is never cancelled by this request).
local v = redis.call('HMGET', KEYS[1], 'state', 'owner')
if v[1] ~= 'active' then
  return 0
end
redis.call('SET', KEYS[2], v[2] or '', 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
