-- random.lua: wrk script that GETs random paths of a bench corpus.
--
--   wrk -t2 -c20 -d10s --latency -s bench/wrk/random.lua http://127.0.0.1:PORT \
--       -- PATHS_FILE [PREFIX] [SEED]
--
-- Arguments after "--" (or the environment, when an argument is absent):
--   PATHS_FILE  WRK_PATHS   paths.txt written by bench/corpus: one relative path a line
--                           (optionally followed by header fields to send with it,
--                           tab-separated: "PATH\tName: value\tName: value")
--   PREFIX      WRK_PREFIX  URL prefix put before each path: "/" for nginx serving
--                           the corpus root, "/bench/" for a Cairn bucket "bench". Default "/".
--   SEED        WRK_SEED    RNG seed; thread i uses SEED+i. Default 1.
--
-- Other environment:
--   WRK_PREFORMAT=1  format every request once at start (see request()); the same
--                 random sequence of files is requested either way.
--   WRK_STRICT=1  also count every response whose status is not 2xx (3xx too) in a
--                 response() callback. Off by default: defining response() makes
--                 wrk copy every body into Lua, which slows the client on large files.
--                 Without it, wrk itself counts statuses >= 400 (errors.status).
--
-- At the end the script prints one line starting with "BENCH_RESULT" with
-- key=value fields (requests, duration_s, bytes, rps, mbps, p50_ms, p90_ms, p99_ms,
-- max_ms, non2xx, err_connect, err_read, err_write, err_timeout, status_errors)
-- that bench/read.sh parses, and exits with status 1 when any request failed:
-- an HTTP status >= 400 (or any non-2xx with WRK_STRICT=1) or a socket error or
-- timeout. MB/s counts every byte read from the socket (headers too), 1 MB = 10^6 bytes.

local paths_file, prefix, seed
local paths = {}
local n = 0
-- non2xx is a global so done() can read it from each thread with thread:get.
non2xx = 0

local threads = {}
local counter = 0

local function load_paths(file)
   local fh, err = io.open(file, "r")
   if not fh then
      error("random.lua: cannot open paths file " .. tostring(file) .. ": " .. tostring(err))
   end
   local list = {}
   for line in fh:lines() do
      line = line:gsub("\r$", "")
      if line ~= "" then
         -- A line may carry header fields after the path, tab-separated
         -- ("PATH\tName: value\t..."; bench/presign -header): they are sent
         -- with it.
         local fields = nil
         local tab = line:find("\t", 1, true)
         if tab then
            fields = {}
            for f in line:sub(tab + 1):gmatch("[^\t]+") do
               local k, v = f:match("^([^:]+):%s*(.*)$")
               if k then fields[k] = v end
            end
            line = line:sub(1, tab - 1)
         end
         -- Paths from bench/corpus are URL-safe; escape the few characters that are
         -- not, in case another corpus is used. A query (presigned URLs,
         -- bench/presign) is kept as it is: it is encoded already.
         local path, query = line:match("^([^?]*)(.*)$")
         line = path:gsub("[^%w%-%._~/]", function(c)
            return string.format("%%%02X", string.byte(c))
         end) .. query
         if fields then
            list[#list + 1] = {line, fields}
         else
            list[#list + 1] = line
         end
      end
   end
   fh:close()
   if #list == 0 then
      error("random.lua: no paths in " .. file)
   end
   return list
end

local function config(args)
   args = args or {}
   paths_file = args[1] or os.getenv("WRK_PATHS")
   prefix = args[2] or os.getenv("WRK_PREFIX") or "/"
   seed = tonumber(args[3] or os.getenv("WRK_SEED") or "1")
   if not paths_file or paths_file == "" then
      error("random.lua: give the paths file as the first argument after -- or in WRK_PATHS")
   end
   if prefix:sub(1, 1) ~= "/" then prefix = "/" .. prefix end
   if prefix:sub(-1) ~= "/" then prefix = prefix .. "/" end
end

-- setup runs once per thread, in the main Lua state.
function setup(thread)
   thread:set("id", counter)
   counter = counter + 1
   threads[#threads + 1] = thread
end

-- format returns the request for entry p of the paths file.
local function format(p)
   if type(p) == "table" then
      return wrk.format("GET", prefix .. p[1], p[2])
   end
   return wrk.format("GET", prefix .. p)
end

-- With WRK_PREFORMAT=1, every request is formatted once, in init, and
-- request() only picks one: the client's cost per request is then the
-- same whatever the request holds (a path, or a path and the fields of a
-- signature), which matters on a machine the client shares with the
-- server. Off by default, as the recorded baselines were measured so.
local preformatted = nil

-- init runs in each thread's own Lua state.
function init(args)
   config(args)
   paths = load_paths(paths_file)
   n = #paths
   if os.getenv("WRK_PREFORMAT") == "1" then
      preformatted = {}
      for i = 1, n do
         preformatted[i] = format(paths[i])
      end
   end
   math.randomseed(seed + (id or 0))
   -- LuaJIT's first draws after seeding are fine, but skip a few anyway.
   for _ = 1, 3 do math.random() end
end


function request()
   if preformatted then
      return preformatted[math.random(n)]
   end
   return format(paths[math.random(n)])
end

if os.getenv("WRK_STRICT") == "1" then
   function response(status, headers, body)
      if status < 200 or status > 299 then
         non2xx = non2xx + 1
      end
   end
end

function done(summary, latency, requests)
   local total_non2xx = 0
   for _, t in ipairs(threads) do
      total_non2xx = total_non2xx + (tonumber(t:get("non2xx")) or 0)
   end
   local secs = summary.duration / 1e6
   local e = summary.errors
   local failed = e.connect + e.read + e.write + e.timeout + e.status + total_non2xx
   local line = string.format(
      "BENCH_RESULT requests=%d duration_s=%.3f bytes=%d rps=%.1f mbps=%.2f " ..
      "p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f non2xx=%d " ..
      "err_connect=%d err_read=%d err_write=%d err_timeout=%d status_errors=%d",
      summary.requests, secs, summary.bytes,
      summary.requests / secs, summary.bytes / secs / 1e6,
      latency:percentile(50) / 1000, latency:percentile(90) / 1000,
      latency:percentile(99) / 1000, latency.max / 1000,
      total_non2xx, e.connect, e.read, e.write, e.timeout, e.status)
   io.write(line .. "\n")
   if summary.requests == 0 then
      io.write("BENCH_FAIL no request completed\n")
      os.exit(1)
   end
   if failed > 0 then
      io.write(string.format("BENCH_FAIL %d failed requests (status>=400: %d, non-2xx: %d, " ..
         "connect: %d, read: %d, write: %d, timeout: %d)\n",
         failed, e.status, total_non2xx, e.connect, e.read, e.write, e.timeout))
      os.exit(1)
   end
end
