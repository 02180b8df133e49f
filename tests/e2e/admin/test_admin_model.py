#!/usr/bin/env python3
"""test_admin_model.py - 1,000 seeded random route adds, deletes and
replacements through the admin API, checked against a Python model of the
route set: each call's status (201/200, 404, 409 for an existing id or a
conflict naming the other route), and after each call the data plane agrees
with the model for the routes it touched (every route answers directly with a
body naming its id and version); every 100 calls a full sweep compares every
path, GET /routes and /routes/match with the model.

Route shapes live in slots that never overlap each other: /s/K (static),
/d/K/{p} (a parameter, its name varying so that equal shapes with other names
conflict) and /c/K/*{p} (a catch-all). A slot holds at most one any-method
route and explicit-method routes with disjoint method sets, the router's
conflict rule; a request takes the route naming its method, else the
any-method route, else 405 if the slot has routes, else 404.

SY_E2E_SEED changes the seed; SY_E2E_MODEL_OPS the number of calls."""
import os
import random

from adminlib import AdminCase, Client, answered_by, gateway_config, local_route, main

SEED = int(os.environ.get("SY_E2E_SEED", "1729"))
OPS = int(os.environ.get("SY_E2E_MODEL_OPS", "1000"))
NSLOTS = 12
IDS = ["m%d" % i for i in range(40)]
METHOD_SETS = [None, ["GET"], ["POST"], ["GET", "POST"]]
NAMES = ["a", "b", "c"]


def slot_pattern(k, name):
    kind = k % 3
    if kind == 0:
        return "/s/%d" % k
    if kind == 1:
        return "/d/%d/{%s}" % (k, name)
    return "/c/%d/*{%s}" % (k, name)


def slot_request(k):
    return ("/s/%d", "/d/%d/value", "/c/%d/rest/of/it")[k % 3] % k


def takes(methods, m):
    return methods is None or m in methods


def conflicts(a, b):
    """Two routes in the same slot conflict when their method sets
    intersect, or both take any method."""
    if a["methods"] is None and b["methods"] is None:
        return True
    if a["methods"] is None or b["methods"] is None:
        return False
    return bool(set(a["methods"]) & set(b["methods"]))


class Model:
    def __init__(self):
        self.routes = {}  # id -> {"slot", "methods", "name", "ver"}

    def conflicting(self, rid, r):
        return sorted(o for o, x in self.routes.items()
                      if o != rid and x["slot"] == r["slot"] and conflicts(x, r))

    def answer(self, k, method):
        """(status, "id.ver") the data plane must give for slot k."""
        in_slot = [(rid, x) for rid, x in self.routes.items() if x["slot"] == k]
        for rid, x in in_slot:
            if x["methods"] is not None and method in x["methods"]:
                return 200, "%s.%d" % (rid, x["ver"])
        for rid, x in in_slot:
            if x["methods"] is None:
                return 200, "%s.%d" % (rid, x["ver"])
        return (405, None) if in_slot else (404, None)

    @staticmethod
    def doc(rid, r):
        d = local_route("%s.%d" % (rid, r["ver"]), slot_pattern(r["slot"], r["name"]),
                        methods=r["methods"])
        d["id"] = rid
        return d


class ModelTest(AdminCase):
    def test_random_route_changes_match_the_model(self):
        rng = random.Random(SEED)
        cfg = gateway_config(routes=[local_route("fixed", "/fixed")])
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        dp = Client(gw.port)
        self.addCleanup(dp.close)
        model = Model()
        etag = api.config()[1]
        ver = 0
        counts = {}

        def data(k, method):
            r = dp.request(method, slot_request(k), body=b"" if method == "POST" else None)
            return r.status, answered_by(r) if r.status == 200 else None

        def check_slot(k, where):
            for method in ("GET", "POST"):
                self.assertEqual(data(k, method), model.answer(k, method),
                                 "%s: slot %d (%s) %s; model %r" % (
                                     where, k, slot_request(k), method,
                                     {i: x for i, x in model.routes.items() if x["slot"] == k}))

        def sweep(where):
            for k in range(NSLOTS):
                check_slot(k, where)
                m = api.get("/routes/match?method=GET&path=" + slot_request(k)).json
                st, who = model.answer(k, "GET")
                self.assertEqual(m["status"], st, (where, k, m))
                if st == 200:
                    self.assertEqual(m["route"]["id"], who.split(".")[0], (where, k, m))
            listed = {r["id"]: r for r in api.get("/routes").json["routes"]}
            want = {rid: Model.doc(rid, r) for rid, r in model.routes.items()}
            want["fixed"] = local_route("fixed", "/fixed")
            self.assertEqual(listed, want, where)
            self.assertEqual(api.get("/status").json["routes"], len(want), where)
            self.assertEqual(data_fixed(), (200, "fixed"), where)

        def data_fixed():
            r = dp.request("GET", "/fixed")
            return r.status, answered_by(r)

        for i in range(OPS):
            where = "op %d (seed %d)" % (i, SEED)
            kind = rng.choices(("add", "delete", "replace"), (45, 25, 30))[0]
            # mostly ids that make sense for the call, sometimes any id
            present = sorted(model.routes)
            absent = [x for x in IDS if x not in model.routes]
            pool = absent if kind == "add" else present
            rid = rng.choice(pool) if pool and rng.random() < 0.8 else rng.choice(IDS)
            ver += 1
            new = {"slot": rng.randrange(NSLOTS), "methods": rng.choice(METHOD_SETS),
                   "name": rng.choice(NAMES), "ver": ver}
            headers = {"If-Match": etag} if rng.random() < 0.5 else None
            touched = {new["slot"]}
            old = model.routes.get(rid)
            if old:
                touched.add(old["slot"])
            if kind == "add":
                r = api.post("/routes", Model.doc(rid, new), headers=headers)
                others = model.conflicting(rid, new)
                want = 409 if old or others else 201
            elif kind == "delete":
                r = api.delete("/routes/" + rid, headers=headers)
                want = 200 if old else 404
                others = []
            else:
                r = api.put("/routes/" + rid, Model.doc(rid, new), headers=headers)
                others = model.conflicting(rid, new) if old else []
                want = 404 if not old else 409 if others else 200
            self.assertEqual(r.status, want, "%s: %s %s %r -> %r" % (where, kind, rid, new, r))
            counts[(kind, want)] = counts.get((kind, want), 0) + 1
            # every answer carries the live ETag: the next If-Match is never stale
            if want in (200, 201):
                self.assertWrite(r, want)
                self.assertNotEqual(r.etag, etag)
            else:
                self.assertEqual(r.etag, etag, where)
            etag = r.etag
            if want == 409 and not (kind == "add" and old):
                err = r.json["errors"][0]
                self.assertIn(err["route"], others, (where, r))
                o = model.routes[err["route"]]
                self.assertEqual(err["pattern"], slot_pattern(o["slot"], o["name"]), where)
            if want in (200, 201):
                if kind == "delete":
                    del model.routes[rid]
                else:
                    model.routes[rid] = new
            for k in sorted(touched):
                check_slot(k, where)
            if (i + 1) % 100 == 0:
                sweep(where)
        sweep("end")
        # the run exercised every outcome
        for key in (("add", 201), ("add", 409), ("delete", 200), ("delete", 404),
                    ("replace", 200), ("replace", 404), ("replace", 409)):
            self.assertGreater(counts.get(key, 0), 0, (key, counts))


if __name__ == "__main__":
    main()
