-- cycle.lua - wrk script for loadtest/compare: replays a request list.
--
--   wrk ... -s cycle.lua http://127.0.0.1:PORT -- REQUEST_FILE
--
-- REQUEST_FILE has one `METHOD PATH` per line (`#` comments allowed). The
-- requests are formatted once in init() and request() hands them out in
-- order, round and round, so the per-request cost is one Lua call that is the
-- same for every server under test. POST, PUT and PATCH carry an empty body
-- with Content-Length: 0. done() prints one machine-readable line:
--
--   SYRESULT requests=N duration_us=N connect=N read=N write=N status=N
--            timeout=N p50_us=N p99_us=N
--
-- `status` counts responses outside 2xx/3xx (wrk's "Non-2xx or 3xx").

local reqs = {}
local n = 0
local i = 0

local body_methods = { POST = true, PUT = true, PATCH = true }

function init(args)
   local path = args[1]
   if not path then
      error("cycle.lua: pass the request file after --")
   end
   for line in io.lines(path) do
      local method, target = line:match("^(%u+)%s+(%S+)")
      if method then
         local body = nil
         if body_methods[method] then
            body = ""
         end
         n = n + 1
         reqs[n] = wrk.format(method, target, nil, body)
      end
   end
   if n == 0 then
      error("cycle.lua: no requests in " .. path)
   end
   -- Threads start at different places so they do not march in step.
   i = (math.random(n) - 1)
end

function request()
   i = i + 1
   if i > n then
      i = 1
   end
   return reqs[i]
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "SYRESULT requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p99_us=%d\n",
      summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50.0), latency:percentile(99.0)))
end
