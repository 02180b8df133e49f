#!/usr/bin/env python3
"""test_admin_memory.py - the admin thread gives back the memory of a large
config once it is replaced: after a 200,000-route push (under a raised
limits.max_routes) is replaced by a one-route config, the gateway's resident
size falls below half of its peak. glibc alone keeps it (a 1,000,000-route
push peaked at 2.4 GB and 2.2 GB stayed). The measured numbers are printed.
Skipped under sanitizers, whose allocators keep freed memory in quarantine."""
import json
import sys
import time

from adminlib import (SY_BIN, TIMEOUT, AdminCase, answered_by, data_get, gateway_config,
                      local_route, main)

BIG = 200000


def sanitized():
    with open(SY_BIN, "rb") as f:
        image = f.read()
    return b"__asan_init" in image or b"__tsan_init" in image


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (key, pid))


class GiveBackTest(AdminCase):
    def test_rss_falls_back_after_a_large_config(self):
        if sanitized():
            self.skipTest("a sanitizer build: its allocator keeps freed memory in quarantine")
        cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=1,
                             limits={"max_routes": BIG})
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        pid = gw.proc.pid
        start = status_kib(pid, "VmRSS")
        big = dict(cfg, routes=[local_route("ping", "/ping")] +
                   [local_route("r%d" % i, "/big/r%d/{x}" % i) for i in range(BIG - 1)])
        t0 = time.monotonic()
        r = api.put("/config", big)
        push_s = time.monotonic() - t0
        self.assertStatus(r, 200)
        self.assertEqual(answered_by(data_get(gw.port, "/big/r%d/x" % (BIG - 2))),
                         "r%d" % (BIG - 2))
        peak = status_kib(pid, "VmHWM")
        self.assertWrite(api.put("/config", cfg), 200)
        # the old snapshot goes after its grace period; a bounded wait for the
        # admin thread to give its memory back
        deadline = time.monotonic() + TIMEOUT
        after = status_kib(pid, "VmRSS")
        while after >= peak // 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            after = status_kib(pid, "VmRSS")
        self.assertLess(after, peak // 2, "VmRSS %d KiB after, peak %d KiB" % (after, peak))
        m = gw.wait_log(r"\[info\] admin heap: \d+ MB given back to the system[^\n]*")
        after = status_kib(pid, "VmRSS")
        sys.stderr.write("\n%d routes: pushed in %.1f s; VmRSS at start %d MiB, peak %d MiB, "
                         "after the one-route config %d MiB (%s)\n"
                         % (BIG, push_s, start >> 10, peak >> 10, after >> 10, m.group(0)))
        self.assertLess(after, peak // 2, "VmRSS %d KiB after, peak %d KiB" % (after, peak))
        self.assertEqual(answered_by(data_get(gw.port, "/ping")), "ping")


if __name__ == "__main__":
    main()
