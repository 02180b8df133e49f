#!/usr/bin/env python3
"""test_admin_persist.py - admin.state_dir: accepted changes survive a
restart (the persisted config wins over -c), the -c file read once at start
(its hash is of the bytes parsed); kill -9 in the middle of a
stream of writes comes back with one of the acknowledged configs (every
acknowledged write present, at most the one in flight missing or present,
never a torn or half-applied config); a corrupt config.json is refused, moved
aside and the previous good one used; a torn last journal line is dropped;
the states a crash can leave in the middle of folding the journal into
config.json replay correctly; a state directory on a full disk (a real 1 MiB
tmpfs) refuses pushes with 500 and no temporary file left, and a start on it
serves the persisted config, says loudly that persistence fails, and takes
pushes again once space is freed; one whose edited -c file wins but whose
persisted config cannot be set aside serves the file, writes nothing over
the old config and refuses changes until the set-aside works."""
import errno
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time

from adminlib import (AdminCase, Admin, Gateway, admin_port, answered_by, data_get, free_port,
                      gateway_config, local_route, metric, parse_prometheus, start_gateway,
                      upstream_cfg, wait_ready, main)

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

    def test_start_hashes_the_bytes_it_parsed(self):
        """The file's hash at start (what a restart and a SIGHUP compare
        with) is of the bytes that were parsed, not of a second read that a
        rename in between would make another file's: a -c FIFO gives its
        text once, and the start must not wait for a second writer."""
        cfg = self.make_config("fifo")
        fifo = self.tmp.file("fifo.json")
        os.mkfifo(fifo)
        text = json.dumps(cfg, indent=1)

        def feed():
            with open(fifo, "w") as f:
                f.write(text)

        threading.Thread(target=feed, daemon=True).start()
        g = Gateway(self.tmp, None, name="fifo", args=["-c", fifo],
                    port=int(cfg["listeners"][0]["address"].rsplit(":", 1)[1]))
        self.addCleanup(g.stop)
        g.start()
        g.cfg = cfg  # only now: start() would have written it to a file of its own
        wait_ready(g)
        api = Admin(admin_port(cfg))
        self.addCleanup(api.close)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.assertEqual(self.answer(g, "/a"), (200, "a"))
        self.stop_clean(g)

    def test_without_state_dir_nothing_persists(self):
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        g = self.gateway(cfg, "nostate")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(self.route_ids(api), ["ping"])
        log = self.log_since(g)
        self.assertNotRegex(log, "persisted config")
        # and the start says so, once
        self.assertEqual(log.count("[notice] admin.state_dir is not set: changes made through "
                                   "the admin API will not survive a restart"), 1, log)
        self.assertIn(", state not persisted\n", log)
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


class FullDiskTest(PersistCase):
    """admin.state_dir on a file system that fills up: a 1 MiB tmpfs,
    mounted for the test (skipped, saying so, where mounting is not
    allowed: it needs root or CAP_SYS_ADMIN) and filled by a ballast file,
    as another program's data fills a real disk."""

    def mount_small(self, opts=""):
        mnt = self.tmp.file("tmpfs-%d" % free_port())
        os.makedirs(mnt)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700" + opts, "tmpfs",
                            mnt], capture_output=True, text=True)
        if p.returncode != 0:
            self.skipTest("cannot mount a 1 MiB tmpfs (needs root or CAP_SYS_ADMIN): %s" %
                          (p.stderr.strip() or "mount exited %d" % p.returncode))
        # lazily: it goes even if something still has a file open there
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], capture_output=True)
        return mnt

    def fill(self, mnt):
        """Writes a ballast file until the file system is full."""
        fd = os.open(os.path.join(mnt, "ballast"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for _ in range(2048):  # 8 MiB at most: far more than 1 MiB
                os.write(fd, b"\0" * 4096)
            self.fail("a 1 MiB tmpfs took 8 MiB")
        except OSError as e:
            self.assertEqual(e.errno, errno.ENOSPC)
        finally:
            os.close(fd)

    def fill_inodes(self, mnt):
        """Makes empty files until the file system has no inode left (a
        directory, or any new file, then fails with ENOSPC too)."""
        try:
            for i in range(4096):
                os.close(os.open(os.path.join(mnt, "inode-%d" % i), os.O_WRONLY | os.O_CREAT))
            self.fail("a tmpfs with nr_inodes=64 took 4096 files")
        except OSError as e:
            self.assertEqual(e.errno, errno.ENOSPC)

    def state_files(self):
        """{name: bytes} of the state directory (its subdirectories as None)."""
        out = {}
        for n in os.listdir(self.state):
            p = os.path.join(self.state, n)
            if os.path.isdir(p):
                out[n] = None
                continue
            with open(p, "rb") as f:
                out[n] = f.read()
        return out

    def persist_metrics(self, api):
        r = api.get("/metrics")
        self.assertStatus(r, 200)
        _, samples = parse_prometheus(r.body.decode())
        return (metric(samples, "switchyard_state_write_failures_total"),
                metric(samples, "switchyard_state_write_failing"))

    def assertRefusedFull(self, r):
        self.assertStatus(r, 500)
        self.assertEqual(r.json["error"], "cannot persist the config; nothing changed", r)
        self.assertIn("No space left on device", r.json["errors"][0]["message"], r)

    def test_full_state_dir(self):
        mnt = self.mount_small()
        self.state = os.path.join(mnt, "state")  # made by the first start
        routes = [local_route("ping", "/ping")]
        cfg = gateway_config(upstreams={"u": upstream_cfg(self.b1)}, routes=routes, workers=1,
                             admin={"address": "127.0.0.1:%d" % free_port(),
                                    "state_dir": self.state})
        g = self.gateway(cfg, "full")
        api = self.start(g)
        live = api.config()[0]
        # a config of some 60 KB, and a journaled change on top
        many = [local_route("r%d" % i, "/many/r%d/{x}" % i) for i in range(600)]
        self.assertWrite(api.put("/config", dict(live, routes=routes + many)), 200)
        self.assertWrite(api.post("/routes", local_route("j", "/j")), 201)
        acked = api.config()[0]
        # a crash in the middle of a save leaves its temporary file
        with open(os.path.join(self.state, "config.json.tmp"), "wb") as f:
            f.write(b"{" * 65536)
        self.fill(mnt)

        # a push is refused with the reason, and leaves no temporary file
        since = g.log_size()
        bigger = dict(acked, routes=acked["routes"] + [local_route("b%d" % i, "/b%d" % i)
                                                       for i in range(300)])
        self.assertRefusedFull(api.put("/config", bigger))
        self.assertFalse(os.path.exists(os.path.join(self.state, "config.json.tmp")),
                         os.listdir(self.state))
        g.wait_log(r"\[error\] state: persistence is failing: .*No space left on device", since)
        self.assertEqual(self.persist_metrics(api), (1, 1))
        self.assertEqual(api.config()[0], acked)
        self.assertEqual(self.answer(g, "/j"), (200, "j"))

        # a start on the full disk serves config.json plus the journal and
        # says so; it does not fail
        self.stop_clean(g)
        with open(os.path.join(self.state, "config.json.tmp"), "wb") as f:
            f.write(b"{")  # what the push above left on the unfixed code
        self.fill(mnt)
        api = self.start(g)
        log = self.log_since(g)
        self.assertRegex(log, r"persisted config in .* wins")
        self.assertRegex(log, r"\[error\] state: persistence is failing at start: serving the "
                         r"persisted config")
        self.assertFalse(os.path.exists(os.path.join(self.state, "config.json.tmp")))
        self.assertEqual(api.config()[0], acked)
        self.assertEqual(self.answer(g, "/j"), (200, "j"))
        self.assertEqual(self.answer(g, "/many/r599/x"), (200, "r599"))
        self.assertEqual(self.persist_metrics(api), (1, 1))
        self.assertRefusedFull(api.put("/config", bigger))
        self.assertEqual(self.persist_metrics(api), (2, 1))

        # space freed: pushes work again, and say so
        os.unlink(os.path.join(mnt, "ballast"))
        since = g.log_size()
        self.assertWrite(api.put("/config", bigger), 200)
        g.wait_log(r"\[notice\] state: persistence works again", since)
        self.assertEqual(self.persist_metrics(api), (2, 0))
        self.assertWrite(api.post("/routes", local_route("k", "/k")), 201)
        want = api.config()[0]
        self.stop_clean(g)
        api = self.start(g)
        self.assertEqual(api.config()[0], want)
        self.assertEqual(self.answer(g, "/b299"), (200, "b299"))
        self.assertEqual(self.answer(g, "/k"), (200, "k"))
        self.stop_clean(g)

    def test_file_edited_on_full_disk(self):
        """The -c file wins over the persisted config, which cannot be set
        aside for want of space: the start serves the file unpersisted,
        writes nothing over the old config, refuses changes until space is
        freed, then sets the old config aside and persists again."""
        mnt = self.mount_small(",nr_inodes=64")
        self.state = os.path.join(mnt, "state")
        routes = [local_route("ping", "/ping")]
        cfg = gateway_config(upstreams={"u": upstream_cfg(self.b1)}, routes=routes, workers=1,
                             admin={"address": "127.0.0.1:%d" % free_port(),
                                    "state_dir": self.state})
        g = self.gateway(cfg, "edited")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("j", "/j")), 201)
        old = api.config()[0]
        self.stop_clean(g)
        before = self.state_files()
        self.fill(mnt)
        self.fill_inodes(mnt)

        # the file is edited: it wins, and the start does not fail
        g.cfg["routes"] = routes + [local_route("edited", "/edited")]
        api = self.start(g)
        log = self.log_since(g)
        self.assertRegex(log, r"\[error\] state: persistence is failing: .*/replaced-[0-9TZ-]+: "
                         r"No space left on device")
        self.assertRegex(log, r"\[error\] state: .* wins over the persisted config in .*cannot "
                         r"be set aside: it is kept as it was")
        self.assertEqual(self.answer(g, "/edited"), (200, "edited"))
        self.assertEqual(self.answer(g, "/j")[0], 404)
        # nothing was written: the old config, its journal and source record
        self.assertEqual(self.state_files(), before)
        self.assertEqual(self.persist_metrics(api), (1, 1))
        r = api.post("/routes", local_route("k", "/k"))
        self.assertStatus(r, 500)
        self.assertIn("replaced-", r.json["errors"][0]["message"], r)
        self.assertIn("No space left on device", r.json["errors"][0]["message"], r)
        self.assertEqual(self.answer(g, "/k")[0], 404)
        self.assertEqual(self.state_files(), before)

        # space freed: the next change sets the old config aside and persists
        os.unlink(os.path.join(mnt, "ballast"))
        for n in os.listdir(mnt):
            if n.startswith("inode-"):
                os.unlink(os.path.join(mnt, n))
        since = g.log_size()
        self.assertWrite(api.post("/routes", local_route("k", "/k")), 201)
        g.wait_log(r"\[notice\] state: persistence works again", since)
        g.wait_log(r"\[warn\] state: the persisted config replaced at start is kept in "
                   r".*/replaced-", since)
        aside = [n for n in os.listdir(self.state) if n.startswith("replaced-")]
        self.assertEqual(len(aside), 1, os.listdir(self.state))
        with open(os.path.join(self.state, aside[0], "config.json"), "rb") as f:
            self.assertEqual(f.read(), before["config.json"])
        with open(os.path.join(self.state, aside[0], "journal"), "rb") as f:
            self.assertEqual(f.read(), before["journal"])
        want = api.config()[0]
        self.assertNotEqual(want, old)
        # the source record now names the edited file: its config wins
        self.stop_clean(g)
        api = self.start(g)
        self.assertRegex(self.log_since(g), r"persisted config in .* wins")
        self.assertEqual(api.config()[0], want)
        self.assertEqual(self.answer(g, "/k"), (200, "k"))
        self.assertEqual(self.answer(g, "/edited"), (200, "edited"))
        self.stop_clean(g)


if __name__ == "__main__":
    main()
