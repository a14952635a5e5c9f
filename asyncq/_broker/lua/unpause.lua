-- unpause: let workers lease tasks of a queue again, and wake idle ones at once.
-- KEYS[1] paused flag        asyncq:{q}:paused
-- ARGV[1] wake channel
-- ARGV[2] queue name
-- Returns: 1 unpaused; 0 it was not paused.
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', ARGV[1], ARGV[2])
  return 1
end
return 0
