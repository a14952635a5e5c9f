-- scheduler_heartbeat: publish the entries of one scheduler process, with a TTL.
-- KEYS[1] entries list       asyncq:schedulers:{<scheduler id>}
-- ARGV[1] TTL in ms (2 x heartbeat interval)
-- ARGV[2..] encoded entries (JSON), one per list element
-- Returns: the number of entries written.
redis.call('DEL', KEYS[1])
if #ARGV > 1 then
  local entries = {}
  for i = 2, #ARGV do
    entries[#entries + 1] = ARGV[i]
  end
  redis.call('RPUSH', KEYS[1], unpack(entries))
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return #ARGV - 1
