-- Builds a table of N string keys, sorts them, rehashes them into a second table with
-- derived keys and values, deletes a third, and prints checksums. N is arg[1].
local n = tonumber(arg[1])
local h = {}
local x = 12345
for i = 1, n do
  x = (x * 1103515245 + 12345) % 2147483648
  h["key:" .. x .. ":" .. (i % 977)] = { i, string.rep("v", 1 + i % 13) }
end
local keys = {}
for k in pairs(h) do keys[#keys + 1] = k end
table.sort(keys)
local r = {}
for _, k in ipairs(keys) do
  local v = h[k]
  r[k:reverse() .. #v[2]] = { id = v[1], len = #v[2], key = k }
end
h = nil
collectgarbage()
local order = {}
for k in pairs(r) do order[#order + 1] = k end
table.sort(order, function(a, b) return r[a].id < r[b].id end)
local deleted = 0
for _, k in ipairs(order) do
  if r[k].id % 3 == 0 then r[k] = nil; deleted = deleted + 1 end
end
local sum, len, kept = 0, 0, 0
for k, v in pairs(r) do sum = sum + v.id; len = len + #k + v.len; kept = kept + 1 end
print(string.format("keys %d first %s last %s", #keys, keys[1], keys[#keys]))
print(string.format("kept %d deleted %d sum %d len %d", kept, deleted, sum, len))
