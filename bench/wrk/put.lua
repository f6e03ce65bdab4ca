-- put.lua: wrk script that PUTs new files of BODY_BYTES bytes (default
-- 15000) under PREFIX, each request a new name (PREFIX t<thread>-<n>).
--
--   wrk -t2 -c20 -d8s -s bench/wrk/put.lua http://127.0.0.1:PORT -- PREFIX AUTHORIZATION [BODY_BYTES]
--
-- AUTHORIZATION is the Authorization header's value ("" for none).
local counter = 0
function setup(thread)
   counter = counter + 1
   thread:set("tid", counter)
end
function init(args)
   prefix = args[1] or "/"
   auth = args[2] or ""
   body = string.rep("x", tonumber(args[3] or "15000"))
   n = 0
end
function request()
   n = n + 1
   local hdr = {}
   if auth ~= "" then hdr["Authorization"] = auth end
   return wrk.format("PUT", prefix .. "t" .. tid .. "-" .. n, hdr, body)
end
