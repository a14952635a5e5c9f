-- workflow_create: a new workflow's record and graph (nothing -> starting).
-- KEYS[1] record             asyncq:{wf:<id>}:t:<id>  (laid out like a task record)
-- KEYS[2] spec hash          KEYS[3] successors hash    KEYS[4] counts hash
-- ARGV[1] workflow id
-- ARGV[2] record message (JSON, as a task message: type "workflow", queue "wf:<id>")
-- ARGV[3] now, Unix ms
-- ARGV[4] final node (the workflow's result is its value)
-- ARGV[5] error callback node, '' none
-- ARGV[6] how long the workflow is kept once it ended, ms
-- ARGV[7] number of task nodes
-- ARGV[8] n = number of nodes, then n (node, spec JSON, successors, count) quadruples
-- Returns: 1 created; 0 a workflow with this id exists (nothing written).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'payload', '', 'state', 'pending',
  'wstate', 'starting', 'created_at', ARGV[3], 'final', ARGV[4], 'onerr', ARGV[5],
  'retention', ARGV[6], 'steps', ARGV[7], 'nfailed', 0)
local n = tonumber(ARGV[8])
local spec, succ, count = {}, {}, {}
local function flush()
  if #spec > 0 then redis.call('HSET', KEYS[2], unpack(spec)) end
  if #succ > 0 then redis.call('HSET', KEYS[3], unpack(succ)) end
  if #count > 0 then redis.call('HSET', KEYS[4], unpack(count)) end
  spec, succ, count = {}, {}, {}
end
for i = 0, n - 1 do
  local at = 9 + 4 * i
  local node = ARGV[at]
  spec[#spec + 1] = node
  spec[#spec + 1] = ARGV[at + 1]
  if ARGV[at + 2] ~= '' then
    succ[#succ + 1] = node
    succ[#succ + 1] = ARGV[at + 2]
  end
  if ARGV[at + 3] ~= '0' then
    count[#count + 1] = node
    count[#count + 1] = ARGV[at + 3]
  end
  if #spec >= 1000 then
    flush()
  end
end
flush()
return 1
