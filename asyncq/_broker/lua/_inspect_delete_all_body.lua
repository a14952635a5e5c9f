-- The body of inspect_delete_all, for both layouts: inspect_delete_all.lua (asyncq's) and
-- asynq_inspect_delete_all.lua (Go asynq's) document its KEYS, ARGV and reply, and define
-- inspect_delete_found before including it: what deleting one task takes in the layout.
local ids = inspect_take(KEYS[1], ARGV[1] == 'pending', tonumber(ARGV[2]))
local deleted = 0
for _, id in ipairs(ids) do
  if inspect_delete_found(ARGV[3] .. id, id, ARGV[1]) then
    deleted = deleted + 1
  end
end
inspect_forget_group(KEYS[1], KEYS[2], ARGV[4])
return {#ids, deleted}
