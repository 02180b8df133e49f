#!/usr/bin/env python3
"""test_admin_persist.py - admin.state_dir: accepted changes survive a
restart (the persisted config wins over -c); kill -9 in the middle of a
stream of writes comes back with one of the acknowledged configs (every
acknowledged write present, at most the one in flight missing or present,
never a torn or half-applied config); a corrupt config.json is refused, moved
aside and the previous good one used; a torn last journal line is dropped;
the states a crash can leave in the middle of folding the journal into
config.json replay correctly."""
import http.client
import json
import os
import random
import shutil
import signal
import threading
import time

from adminlib import (AdminCase, Admin, Gateway, admin_port, answered_by, data_get, free_port,
                      gateway_config, local_route, start_gateway, upstream_cfg, main)

SEED = int(os.environ.get("SY_E2E_SEED", "20241129"))


class PersistCase(AdminCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b1 = cls.shared_backend("b1")
        cls.b2 = cls.shared_backend("b2")

    def make_config(self, name, routes=None):
        self.state = self.tmp.file("state-" + name)
        routes = routes if routes is not None else [local_route("ping", "/ping")]
        return gateway_config(upstreams={"u": upstream_cfg(self.b1)}, routes=routes,
                              admin={"address": "127.0.0.1:%d" % free_port(),
                                     "state_dir": self.state})

    def gateway(self, cfg, name):
        g = Gateway(self.tmp, cfg, name=name)
        self.addCleanup(g.stop)
        return g

    def start(self, g):
        """(Re)starts <g> from its -c file; returns an Admin client."""
        self.since = start_gateway(g)
        a = Admin(admin_port(g.cfg))
        self.addCleanup(a.close)
        return a

    def stop_clean(self, g):
        g.stop()
        g.check_clean()

    def kill9(self, g):
        os.killpg(g.proc.pid, signal.SIGKILL)
        g.proc.wait()
        g.stop()  # reaps and forgets it

    def log_since(self, g):
        return g.log()[self.since:]

    def answer(self, g, path, method="GET"):
        r = data_get(g.port, path, method=method)
        return r.status, answered_by(r)

    def route_ids(self, api):
        r = api.get("/routes")
        self.assertStatus(r, 200)
        return sorted(x["id"] for x in r.json["routes"])


# ---------------------------------------------------------------------------


class RestartTest(PersistCase):
    def test_changes_survive_restart(self):
        cfg = self.make_config("restart", routes=[local_route("ping", "/ping"),
                                                  local_route("keep", "/keep")])
        original = json.dumps(cfg, indent=1)
        g = self.gateway(cfg, "restart")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.assertWrite(api.post("/routes", local_route("b", "/b/{x}")), 201)
        self.assertWrite(api.put("/routes/a", local_route("a", "/a2")), 200)
        self.assertWrite(api.delete("/routes/ping"), 200)
        self.assertWrite(api.post("/upstreams", {"name": "v",
                                                 "servers": [{"address": self.b2.addr}]}), 201)
        self.assertWrite(api.post("/routes", {"id": "pv", "path": "/pv/*{r}", "upstream": "v"}),
                         201)
        self.assertWrite(api.post("/routes", local_route("c", "/c")), 201)
        live, etag, _ = api.config()
        self.stop_clean(g)
        # the -c file is untouched; the persisted config wins over it
        with open(g.cfg_path) as f:
            self.assertEqual(f.read(), original)
        for cycle in range(2):
            api = self.start(g)
            self.assertRegex(self.log_since(g), r"persisted config in .* wins")
            cfg2, etag2, _ = api.config()
            self.assertEqual(cfg2, live)
            # the same document: the same hash part of the ETag
            self.assertEqual(etag2.split("-")[1], etag.split("-")[1])
            self.assertEqual(self.answer(g, "/a2"), (200, "a"))
            self.assertEqual(self.answer(g, "/a")[0], 404)
            self.assertEqual(self.answer(g, "/b/1"), (200, "b"))
            self.assertEqual(self.answer(g, "/c"), (200, "c"))
            self.assertEqual(self.answer(g, "/keep"), (200, "keep"))
            self.assertEqual(self.answer(g, "/ping")[0], 404)
            r = data_get(g.port, "/pv/x")
            self.assertEqual((r.status, r.json()["backend"]), (200, "b2"))
            self.stop_clean(g)
        # a change after restarts persists too
        api = self.start(g)
        self.assertWrite(api.delete("/routes/c"), 200)
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(self.answer(g, "/c")[0], 404)
        self.assertEqual(self.answer(g, "/keep"), (200, "keep"))
        self.stop_clean(g)

    def test_whole_config_write_survives_restart(self):
        cfg = self.make_config("whole")
        g = self.gateway(cfg, "whole")
        api = self.start(g)
        live, _, _ = api.config()
        new = dict(live, routes=[local_route("only", "/only")])
        self.assertWrite(api.put("/config", new), 200)
        self.assertWrite(api.post("/routes", local_route("after", "/after")), 201)
        want = api.config()[0]
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(api.config()[0], want)
        self.assertEqual(self.answer(g, "/only"), (200, "only"))
        self.assertEqual(self.answer(g, "/after"), (200, "after"))
        self.assertEqual(self.answer(g, "/ping")[0], 404)
        self.stop_clean(g)

    def test_without_state_dir_nothing_persists(self):
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        g = self.gateway(cfg, "nostate")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(self.route_ids(api), ["ping"])
        self.assertNotRegex(self.log_since(g), "persisted")
        self.stop_clean(g)


# ---------------------------------------------------------------------------


class Writer(threading.Thread):
    """POSTs and DELETEs routes as fast as it can until the connection dies.
    Keeps the route set after every acknowledged write and the write in
    flight (sent, not answered)."""

    def __init__(self, port, model, rng, prefix, kill_at=None, on_kill=None):
        super().__init__(daemon=True)
        self.api = Admin(port, timeout=60)
        self.model = dict(model)  # id -> route, after the last acknowledged write
        self.rng, self.prefix = rng, prefix
        self.inflight = None
        self.acked = 0
        self.kill_at, self.on_kill = kill_at, on_kill
        self.error = None
        self.n = 0

    def run(self):
        try:
            while True:
                ids = sorted(self.model)
                if not ids or self.rng.random() < 0.6:
                    rid = "%s%d" % (self.prefix, self.n)
                    self.n += 1
                    route = local_route(rid, "/k/" + rid, methods=["GET"])
                    op = ("put", rid, route)
                else:
                    rid = self.rng.choice(ids)
                    op = ("delete", rid, None)
                self.inflight = op
                if op[0] == "put":
                    r = self.api.post("/routes", op[2])
                    want = 201
                else:
                    r = self.api.delete("/routes/" + rid)
                    want = 200
                if r.status != want:
                    self.error = "%s %s -> %r" % (op[0], rid, r)
                    return
                self.model = apply_op(self.model, op)
                self.inflight = None
                self.acked += 1
                if self.kill_at is not None and self.acked == self.kill_at:
                    self.on_kill()
        except (OSError, http.client.HTTPException):
            return  # the process was killed: the write in flight stays unknown
        finally:
            self.api.close()


def apply_op(model, op):
    m = dict(model)
    if op[0] == "put":
        m[op[1]] = op[2]
    else:
        m.pop(op[1], None)
    return m


class KillTest(PersistCase):
    def check_restored(self, g, api, w, initial):
        """The routes after the restart: every acknowledged write, and the
        one in flight either applied or not; nothing else."""
        got = {r["id"]: r for r in api.get("/routes").json["routes"]}
        ok = [w.model]
        if w.inflight:
            ok.append(apply_op(w.model, w.inflight))
        self.assertIn(got, ok, "restored %d routes; acked %d writes; in flight %r; missing %r; "
                      "extra %r" % (len(got), w.acked, w.inflight,
                                    sorted(set(w.model) - set(got)),
                                    sorted(set(got) - set(w.model))))
        # the whole config is the original one plus these routes: nothing torn
        cfg = api.config()[0]
        self.assertEqual({k: v for k, v in cfg.items() if k != "routes"},
                         {k: v for k, v in initial.items() if k != "routes"})
        # and the data plane agrees (a bounded sample)
        rng = random.Random(len(got))
        for rid in rng.sample(sorted(got), min(len(got), 25)):
            self.assertEqual(self.answer(g, "/k/" + rid if rid != "ping" else "/ping"),
                             (200, rid))
        for rid in sorted(set(w.model) | set(got))[:200]:
            if rid not in got:
                self.assertEqual(self.answer(g, "/k/" + rid)[0], 404)
        return got

    def test_kill9_during_writes(self):
        rng = random.Random(SEED)
        cfg = self.make_config("kill")
        initial = json.loads(json.dumps(cfg))
        g = self.gateway(cfg, "kill")
        api = self.start(g)
        model = {r["id"]: r for r in api.get("/routes").json["routes"]}
        for rnd in range(4):
            killed = threading.Event()
            if rnd < 3:
                w = Writer(admin_port(cfg), model, random.Random(rng.random()), "r%d-" % rnd)
                w.start()
                # a random moment once some writes are acknowledged
                delay = rng.uniform(0.05, 0.6)
                self.assertTrue(_wait(lambda: w.acked >= 5 or not w.is_alive()))
                killed.wait(delay)
            else:
                # across the fold of the journal into config.json (every
                # 1000 changes): kill right around it
                target = rng.randint(985, 1005)
                w = Writer(admin_port(cfg), model, random.Random(rng.random()), "r%d-" % rnd,
                           kill_at=target, on_kill=killed.set)
                w.start()
                self.assertTrue(_wait(lambda: killed.is_set() or not w.is_alive(), 300),
                                "the writer did not get to %d writes" % target)
            self.kill9(g)
            w.join(60)
            self.assertFalse(w.is_alive())
            self.assertIsNone(w.error, w.error)
            self.assertGreater(w.acked, 0)
            api = self.start(g)
            model = self.check_restored(g, api, w, initial)
        self.stop_clean(g)


def _wait(cond, timeout=120):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


# ---------------------------------------------------------------------------


class CorruptTest(PersistCase):
    def test_corrupt_config_json_uses_prev(self):
        for variant in ("garbage", "truncated"):
            with self.subTest(variant=variant):
                self.corrupt_case(variant)

    def corrupt_case(self, variant):
        cfg = self.make_config("corrupt-" + variant)
        g = self.gateway(cfg, "corrupt-" + variant)
        api = self.start(g)
        live = api.config()[0]
        b_cfg = dict(live, routes=live["routes"] + [local_route("b", "/b")])
        c_cfg = dict(live, routes=live["routes"] + [local_route("c", "/c")])
        self.assertWrite(api.put("/config", b_cfg), 200)
        self.assertWrite(api.put("/config", c_cfg), 200)
        self.assertWrite(api.post("/routes", local_route("j", "/j")), 201)  # journaled
        self.stop_clean(g)
        path = os.path.join(self.state, "config.json")
        with open(os.path.join(self.state, "config.json.prev")) as f:
            self.assertEqual(json.load(f), b_cfg)
        with open(path, "rb") as f:
            text = f.read()
        bad = (b"\x00garbage\xff{{{ not json" if variant == "garbage"
               else text[:len(text) // 2])
        with open(path, "wb") as f:
            f.write(bad)
        api = self.start(g)
        log = self.log_since(g)
        self.assertRegex(log, r"\[error\] state: .*config\.json is corrupt")
        self.assertRegex(log, r"config\.json\.prev")
        self.assertEqual(api.config()[0], b_cfg)
        self.assertEqual(self.answer(g, "/b"), (200, "b"))
        self.assertEqual(self.answer(g, "/c")[0], 404)
        self.assertEqual(self.answer(g, "/j")[0], 404)
        # the refused file is kept for inspection
        with open(path + ".corrupt", "rb") as f:
            self.assertEqual(f.read(), bad)
        # and the good config is the persisted one from now on
        self.assertWrite(api.post("/routes", local_route("d", "/d")), 201)
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(api.config()[0], dict(b_cfg, routes=b_cfg["routes"] +
                                               [local_route("d", "/d")]))
        self.stop_clean(g)

    def test_corrupt_without_prev_starts_from_c(self):
        cfg = self.make_config("noprev")
        g = self.gateway(cfg, "noprev")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.stop_clean(g)
        for name in ("config.json", "config.json.prev"):
            p = os.path.join(self.state, name)
            if os.path.exists(p):
                with open(p, "w") as f:
                    f.write("}{")
        api = self.start(g)
        self.assertRegex(self.log_since(g), r"corrupt")
        self.assertEqual(self.route_ids(api), ["ping"])
        self.assertEqual(self.answer(g, "/ping"), (200, "ping"))
        self.stop_clean(g)

    def test_torn_journal_line_dropped(self):
        cfg = self.make_config("torn")
        g = self.gateway(cfg, "torn")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.assertWrite(api.post("/routes", local_route("b", "/b")), 201)
        self.assertWrite(api.delete("/routes/ping"), 200)
        self.stop_clean(g)
        with open(os.path.join(self.state, "journal"), "ab") as f:
            f.write(b'{"op":"put_route","route":{"id":"torn","path":"/torn","resp')
        api = self.start(g)
        self.assertEqual(self.route_ids(api), ["a", "b"])
        self.assertEqual(self.answer(g, "/a"), (200, "a"))
        self.assertEqual(self.answer(g, "/torn")[0], 404)
        # the next change appends after the good lines, not after the torn one
        self.assertWrite(api.post("/routes", local_route("c", "/c")), 201)
        self.kill9(g)
        api = self.start(g)
        self.assertEqual(self.route_ids(api), ["a", "b", "c"])
        self.stop_clean(g)


class FoldCrashTest(PersistCase):
    maxDiff = None
    """The files a crash leaves between renaming the new config.json into
    place and emptying the journal: config.json already holds the journal's
    changes (or a whole new config), the journal still holds them too. A
    restart must come back with config.json's content, not replay the old
    journal on top of it."""

    def run_and_keep_journal(self, name, writes_before, writes_after):
        cfg = self.make_config(name, routes=[local_route("ping", "/ping"),
                                             local_route("p", "/p")])
        g = self.gateway(cfg, name)
        api = self.start(g)
        writes_before(api)
        jpath = os.path.join(self.state, "journal")
        shutil.copy(jpath, jpath + ".saved")
        writes_after(api)  # rewrites config.json and empties the journal
        want = api.config()[0]
        self.stop_clean(g)
        return g, jpath, want

    def restart_with_old_journal(self, g, jpath, want):
        shutil.copy(jpath + ".saved", jpath)
        api = self.start(g)
        self.assertEqual(api.config()[0], want)
        self.stop_clean(g)

    def test_fold_crash_after_rename(self):
        def before(api):
            self.assertWrite(api.post("/routes", local_route("x", "/x")), 201)
            self.assertWrite(api.delete("/routes/p"), 200)
            self.assertWrite(api.delete("/routes/x"), 200)

        def after(api):
            # a whole-config write folds the journal (what the 1000th change does);
            # it changes a live key (workers would need a restart: a 409)
            live = api.config()[0]
            self.assertWrite(api.put("/config", dict(live, limits={"max_headers": 99})), 200)

        g, jpath, want = self.run_and_keep_journal("fold1", before, after)
        self.assertEqual(sorted(r["id"] for r in want["routes"]), ["ping"])
        self.restart_with_old_journal(g, jpath, want)

    def test_whole_config_crash_after_rename(self):
        def before(api):
            self.assertWrite(api.post("/routes", local_route("x", "/x")), 201)

        def after(api):
            live = api.config()[0]
            self.assertWrite(api.put("/config", dict(live, routes=[local_route("n", "/n")])),
                             200)

        g, jpath, want = self.run_and_keep_journal("fold2", before, after)
        self.restart_with_old_journal(g, jpath, want)


if __name__ == "__main__":
    main()
