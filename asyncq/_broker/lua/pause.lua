-- pause: stop workers from leasing tasks of a queue.
-- KEYS[1] paused flag        asyncq:{q}:paused
-- ARGV[1] now, Unix ms (stored as the pause time)
-- Returns: 1 paused; 0 it was already paused.
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  return 1
end
return 0
