-- The task event format, included by _lib.lua and, with the shared-include prefix, by Go
-- asynq's _asynq_lib.lua: both layouts publish asyncq's events, so one copy says what an event
-- is. It builds no key name (each layout passes its channel) and reads no clock.

-- Publish one task event on shard channel `channel`: the JSON header `head` (id, from, to,
-- at, retried, type) with the fields of `extra` added, a newline, then `body` (a result, or
-- nothing).
local function event_publish(channel, head, extra, body)
  if extra then
    for k, x in pairs(extra) do
      head[k] = x
    end
  end
  redis.call('SPUBLISH', channel, cjson.encode(head) .. '\n' .. (body or ''))
end
