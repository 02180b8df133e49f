#!/usr/bin/env python3
"""test_admin_auth.py - the admin API's bearer token, from admin.token_file
or SWITCHYARD_ADMIN_TOKEN: no token or a wrong one is 401 (and changes
nothing), the right one is 200, /healthz needs none; switchyard refuses to
start on a non-loopback admin address without a token, before binding
anything."""
import http.client
import json
import os
import signal
import subprocess
import time

from adminlib import (SY_BIN, TIMEOUT, AdminCase, admin_port, answered_by, data_get,
                      free_port, gateway_config, local_route, port_is_bound, main)

TOKEN = "s3cr3t-token_0123456789"


class AuthCase(AdminCase):
    def check_auth(self, gw, token):
        api = self.admin_for(gw)
        # /healthz needs no token
        r = api.get("/healthz", token=None)
        self.assertStatus(r, 200)
        paths = ["/config", "/routes", "/routes/ping", "/routes/match?path=/ping", "/upstreams",
                 "/status", "/metrics", "/nope"]
        for p in paths:
            for bad in (None, "wrong", TOKEN[:-1], TOKEN + "x", ""):
                r = api.get(p, token=bad)
                self.assertStatus(r, 401, (p, bad))
                self.assertIn("Bearer", r.header("WWW-Authenticate") or "", r.headers)
        # other schemes and malformed headers
        for h in ("Basic " + token, token, "Bearer", "Bearer " + token + " x", "bearer" + token):
            r = api.get("/config", token=None, headers={"Authorization": h})
            self.assertStatus(r, 401, h)
        # writes without the token change nothing
        before = api.get("/config", token=token).etag
        for method, p, body in (("POST", "/routes", local_route("x", "/x")),
                                ("PUT", "/routes/ping", local_route("ping", "/p2")),
                                ("DELETE", "/routes/ping", None),
                                ("PUT", "/config", "{}"),
                                ("POST", "/upstreams", {"name": "v", "servers": []})):
            self.assertStatus(api.request(method, p, body, token="wrong"), 401, p)
            self.assertStatus(api.request(method, p, body, token=None), 401, p)
        self.assertEqual(api.get("/config", token=token).etag, before)
        self.assertEqual(answered_by(data_get(gw.port, "/ping")), "ping")
        self.assertEqual(data_get(gw.port, "/x").status, 404)
        # the right token works for every call
        for p in paths[:-1]:
            self.assertStatus(api.get(p, token=token), 200, p)
        self.assertStatus(api.get("/nope", token=token), 404)
        r = api.post("/routes", local_route("x", "/x"), token=token)
        self.assertWrite(r, 201)
        self.assertEqual(answered_by(data_get(gw.port, "/x")), "x")
        # the scheme name is case-insensitive (RFC 7235)
        r = api.get("/config", token=None, headers={"Authorization": "bearer " + token})
        self.assertStatus(r, 200)


class TokenFileTest(AuthCase):
    def test_token_file(self):
        path = self.tmp.file("admin.token")
        with open(path, "w") as f:
            f.write(TOKEN + "\n")  # a trailing newline is not part of the token
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"]["token_file"] = path
        gw = self.own_gateway(cfg, name="tokenfile")
        self.assertIn("bearer token", gw.log())
        self.check_auth(gw, TOKEN)

    def test_token_file_wins_over_env(self):
        path = self.tmp.file("admin2.token")
        with open(path, "w") as f:
            f.write("from-file")
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"]["token_file"] = path
        gw = self.own_gateway(cfg, name="both", env={"SWITCHYARD_ADMIN_TOKEN": "from-env"})
        api = self.admin_for(gw)
        self.assertStatus(api.get("/status", token="from-file"), 200)
        self.assertStatus(api.get("/status", token="from-env"), 401)

    def test_unreadable_or_empty_token_file_refuses_to_start(self):
        for name, content in (("missing.token", None), ("empty.token", "\n")):
            path = self.tmp.file(name)
            if content is not None:
                with open(path, "w") as f:
                    f.write(content)
            cfg = gateway_config(routes=[local_route("ping", "/ping")])
            cfg["admin"]["token_file"] = path
            rc, err = run_to_exit(self.tmp, cfg, name)
            self.assertNotEqual(rc, 0, err)
            self.assertIn(name, err)
            self.assertFalse(port_is_bound(admin_port(cfg)))


class EnvTokenTest(AuthCase):
    def test_env_token(self):
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        gw = self.own_gateway(cfg, name="envtoken", env={"SWITCHYARD_ADMIN_TOKEN": TOKEN})
        self.assertIn("bearer token", gw.log())
        self.check_auth(gw, TOKEN)

    def test_no_token_is_open_on_loopback(self):
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        env = {"SWITCHYARD_ADMIN_TOKEN": ""}
        gw = self.own_gateway(cfg, name="open", env=env)
        api = self.admin_for(gw)
        self.assertStatus(api.get("/config"), 200)
        self.assertStatus(api.get("/config", token="anything"), 200)


def run_to_exit(tmp, cfg, name, env=None):
    """Runs switchyard on <cfg> and waits for it to exit; (rc, stderr). Fails
    (and kills it) if it binds its admin port instead."""
    path = tmp.file(name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    e = dict(os.environ)
    e.update(env or {})
    errp = tmp.file(name + ".err")
    with open(errp, "wb") as err:
        p = subprocess.Popen([SY_BIN, "-c", path], stdout=subprocess.DEVNULL, stderr=err, env=e,
                             start_new_session=True)
    port = admin_port(cfg)
    deadline = time.monotonic() + TIMEOUT
    try:
        while p.poll() is None:
            if port_is_bound(port) or time.monotonic() > deadline:
                with open(errp, errors="replace") as f:
                    raise AssertionError("switchyard did not refuse to start:\n" + f.read())
            time.sleep(0.02)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    with open(errp, errors="replace") as f:
        return p.returncode, f.read()


class NonLoopbackTest(AuthCase):
    def refuse(self, env, name):
        port, listen = free_port(), free_port()
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["listeners"] = [{"address": "127.0.0.1:%d" % listen}]
        cfg["admin"] = {"address": "0.0.0.0:%d" % port}
        rc, err = run_to_exit(self.tmp, cfg, name, env)
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"not loopback.*refusing to start", err)
        self.assertFalse(port_is_bound(port))
        self.assertFalse(port_is_bound(listen))

    def test_non_loopback_without_token_refused(self):
        self.refuse({}, "nonloop")

    def test_non_loopback_with_empty_env_token_refused(self):
        # an empty SWITCHYARD_ADMIN_TOKEN is no token
        self.refuse({"SWITCHYARD_ADMIN_TOKEN": ""}, "nonloop-empty")

    def test_non_loopback_v6_without_token_refused(self):
        port = free_port()
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"] = {"address": "[::]:%d" % port}
        rc, err = run_to_exit(self.tmp, cfg, "nonloop6")
        self.assertNotEqual(rc, 0, err)
        self.assertIn("not loopback", err)

    def test_other_loopback_addresses_start(self):
        # 127.0.0.0/8 is loopback: no token needed
        port = free_port()
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"] = {"address": "127.0.0.2:%d" % port}
        self.own_gateway(cfg, name="lo2")
        c = http.client.HTTPConnection("127.0.0.2", port, timeout=TIMEOUT)
        c.request("GET", "/status")
        self.assertEqual(c.getresponse().status, 200)
        c.close()


if __name__ == "__main__":
    main()
