-- Reading a task's expiry, prepended by "-- @include _expiry_lib.lua" (tiny and self-contained:
-- _wake_lib.lua's one-hop hand-off needs it in every script that makes tasks pending).
-- A task expires when its message has an "expires" member (Unix ms, written by
-- TaskMessage.encode only when set): not started by then, it is archived unrun (_expire_lib.lua).
-- The member is found without decoding the JSON: the text '"expires":<digits>' can only be that
-- member (a '"' inside a JSON string is escaped, and the one nested object, headers, holds
-- strings only), so a task without an expiry costs one plain string search of its message.

-- The expiry of a task message (Unix ms), or nil when it has none.
local function asyncq_expiry(msg)
  if not msg then
    return nil
  end
  local at = 1
  while true do
    local _, last = string.find(msg, '"expires":', at, true)
    if not last then
      return nil
    end
    local digits = string.match(msg, '^%d+', last + 1)
    if digits then
      return tonumber(digits)
    end
    at = last + 1  -- a header named "expires" (its value a string): look further
  end
end
