#!/usr/bin/env python3
"""test_policy_jwt.py - the "jwt" route policy (issue 27) end to end: RS256,
ES256 and HS256 tokens (keys made by the openssl CLI, signatures by it or by
Python's hmac) let through with their claims in upstream headers and the
client's own copies of those headers dropped; forged, expired, wrong iss and
aud, alg none, algorithm confusion (HS256 keyed with the RSA public key),
garbage and oversized Authorization values refused with RFC 6750's 401
fields; a key rotation by a push of a rewritten jwks_file; bad definitions
refused at their JSON paths while the live config serves; tokens never in
the access log."""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "admin"))

from harness import main, wait_for  # noqa: E402
from test_policies import PolicyCase, values  # noqa: E402

ISS = "https://id.example"
SECRET = b"an-hs256-secret-of-at-least-32-bytes!!"


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def openssl(*args, data=None):
    return subprocess.run(["openssl"] + list(args), input=data, check=True,
                          capture_output=True, timeout=60).stdout


def der_len(d, i):
    n = d[i]
    if n < 0x80:
        return n, i + 1
    k = n & 0x7f
    return int.from_bytes(d[i + 1:i + 1 + k], "big"), i + 1 + k


def ecdsa_raw(der, half=32):
    """r || s of an ECDSA-Sig-Value (what `openssl dgst -sign` writes)."""
    _, i = der_len(der, 1)
    out = b""
    for _ in range(2):
        assert der[i] == 0x02
        n, i = der_len(der, i + 1)
        out += der[i:i + n].lstrip(b"\0").rjust(half, b"\0")
        i += n
    return out


class Keys:
    """An RSA and a P-256 key pair in <d>, and their JWKs."""

    def __init__(self, d, tag):
        self.rsa = os.path.join(d, "rsa-%s.pem" % tag)
        self.ec = os.path.join(d, "ec-%s.pem" % tag)
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                "-out", self.rsa)
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-out", self.ec)
        self.rsa_pub = openssl("pkey", "-in", self.rsa, "-pubout")
        mod = openssl("rsa", "-in", self.rsa, "-noout", "-modulus").decode().strip()
        n = bytes.fromhex(mod.split("=", 1)[1])
        point = openssl("pkey", "-in", self.ec, "-pubout", "-outform", "DER")[-65:]
        assert point[0] == 4
        self.kid_rsa, self.kid_ec = "r-" + tag, "e-" + tag
        self.jwks = {"keys": [
            {"kty": "RSA", "kid": self.kid_rsa, "use": "sig", "alg": "RS256",
             "n": b64u(n), "e": "AQAB"},
            {"kty": "EC", "kid": self.kid_ec, "crv": "P-256", "use": "sig",
             "x": b64u(point[1:33]), "y": b64u(point[33:])}]}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.jwks, f)

    def sign(self, alg, claims, header=None, hs_key=SECRET):
        h = {"alg": alg, "typ": "JWT"}
        if alg == "RS256":
            h["kid"] = self.kid_rsa
        elif alg == "ES256":
            h["kid"] = self.kid_ec
        h.update(header or {})
        tbs = (b64u(json.dumps(h).encode()) + "." +
               b64u(json.dumps(claims).encode())).encode()
        if alg == "HS256":
            sig = hmac.new(hs_key, tbs, hashlib.sha256).digest()
        elif alg == "RS256":
            sig = openssl("dgst", "-sha256", "-sign", self.rsa, data=tbs)
        elif alg == "ES256":
            sig = ecdsa_raw(openssl("dgst", "-sha256", "-sign", self.ec, data=tbs))
        else:
            sig = b""
        return tbs.decode() + "." + b64u(sig)


def claims(**kw):
    now = int(time.time())
    c = {"iss": ISS, "aud": "api", "sub": "alice", "iat": now, "exp": now + 600}
    c.update(kw)
    return {k: v for k, v in c.items() if v is not None}


def bearer(tok):
    return ("Authorization", "Bearer " + tok)


class JwtTest(PolicyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        d = os.path.dirname(cls.log)
        cls.k = Keys(d, "one")
        cls.k2 = Keys(d, "two")
        cls.jwks = cls.tmp.file("jwks.json")
        cls.k.write(cls.jwks)
        cls.rot = cls.tmp.file("rot.json")
        cls.k.write(cls.rot)
        cls.secret = cls.tmp.file("hs.secret")
        with open(cls.secret, "wb") as f:
            f.write(SECRET + b"\n")
        cls.policies = {
            "tokens": {"type": "jwt", "jwks_file": cls.jwks, "hs256_secret_file": cls.secret,
                       "issuer": ISS, "audiences": ["api"], "leeway_s": 30,
                       "claims_to_headers": {"sub": "X-User", "scope": "X-Scope"}},
            "rsaonly": {"type": "jwt", "jwks_file": cls.jwks, "realm": "RSA only",
                        "claims_to_headers": {"sub": "X-User"}},
            "kept": {"type": "jwt", "jwks_file": cls.jwks, "forward_token": False,
                     "claims_to_headers": {"sub": "X-User"}},
            "rot": {"type": "jwt", "jwks_file": cls.rot, "algorithms": ["RS256"]},
        }
        routes = [
            {"id": "api", "path": "/api/*{rest}", "upstream": "b", "policies": ["tokens"]},
            {"id": "rsa", "path": "/rsa", "upstream": "b", "policies": ["rsaonly"]},
            {"id": "kept", "path": "/kept", "upstream": "b", "policies": ["kept"]},
            {"id": "rot", "path": "/rot", "upstream": "b", "policies": ["rot"]},
            {"id": "open", "path": "/open", "upstream": "b"},
        ]
        cls.start_gateway(routes)

    def refused(self, target, headers, why=None, realm="tokens"):
        r = self.get(target, headers)
        self.assertEqual(r.status, 401, (headers, r))
        www = r.header("WWW-Authenticate")
        if why is None:
            self.assertEqual(www, 'Bearer realm="%s"' % realm)
        else:
            self.assertEqual(www, 'Bearer realm="%s", error="invalid_token", '
                             'error_description="%s"' % (realm, why), headers)
        return r

    def test_valid_tokens_pass_with_their_claims(self):
        for alg in ("RS256", "ES256", "HS256"):
            with self.subTest(alg=alg):
                tok = self.k.sign(alg, claims(sub="u-" + alg, scope="read"))
                for _ in range(2):  # the second from the worker's cache
                    r = self.get("/api/x", [bearer(tok), ("X-User", "mallory"),
                                            ("x-scope", "admin")])
                    self.assertEqual(r.status, 200, r)
                    e = r.json()
                    self.assertEqual(values(e, "X-User"), ["u-" + alg])
                    self.assertEqual(values(e, "X-Scope"), ["read"])
                    self.assertEqual(values(e, "Authorization"), ["Bearer " + tok])
        # a claim the token does not have: no header, and still no client copy
        r = self.get("/api/x", [bearer(self.k.sign("RS256", claims())), ("X-Scope", "admin")])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(values(r.json(), "X-Scope"), [])
        # within the leeway
        r = self.get("/api/x", [bearer(self.k.sign("ES256", claims(exp=int(time.time()) - 10)))])
        self.assertEqual(r.status, 200, r)

    def test_forward_token_false_keeps_the_token(self):
        """forward_token: false (Envoy's forward: false): the upstream gets the
        claims it was given, never the token."""
        tok = self.k.sign("RS256", claims(sub="carol"))
        for _ in range(2):  # the second from the worker's cache
            r = self.get("/kept", [bearer(tok), ("authorization", "Bearer second")])
            self.assertEqual(r.status, 401, r)  # two Authorization fields: refused
            r = self.get("/kept", [bearer(tok)])
            self.assertEqual(r.status, 200, r)
            self.assertEqual(values(r.json(), "X-User"), ["carol"])
            self.assertEqual(values(r.json(), "Authorization"), [])

    def test_missing_and_other_schemes(self):
        self.refused("/api/x", [])
        self.refused("/api/x", [("Authorization", "Basic YWxpY2U6cHc=")])
        self.refused("/rsa", [], realm="RSA only")
        self.assertEqual(self.get("/open").status, 200)

    def test_refused_tokens(self):
        k = self.k
        good = k.sign("RS256", claims())
        h, p, s = good.split(".")
        sig = bytearray(base64.urlsafe_b64decode(s + "=="))
        sig[10] ^= 1
        forged_sig = h + "." + p + "." + b64u(bytes(sig))
        other = b64u(json.dumps(claims(sub="root")).encode())
        forged_claims = h + "." + other + "." + s
        now = int(time.time())
        bad_sig = "the signature does not verify"
        cases = [
            (forged_sig, bad_sig),
            (forged_claims, bad_sig),
            (k.sign("HS256", claims(), hs_key=b"x" * 40), bad_sig),
            (k.sign("ES256", claims(exp=now - 100)), "the token has expired"),
            (k.sign("ES256", claims(nbf=now + 300)), "the token is not valid yet (nbf)"),
            (k.sign("RS256", claims(iss="https://evil.example")),
             "iss is not the issuer accepted"),
            (k.sign("RS256", claims(iss=None)), "the token has no iss"),
            (k.sign("RS256", claims(aud="other")), "no audience of the token is accepted"),
            (k.sign("RS256", claims(exp=None)), "the token has no exp"),
            (k.sign("none", claims()), "the token's alg is none or unknown"),
            (k.sign("none", claims()) + "A", "a part is not unpadded base64url"),
            # algorithm confusion: HS256 keyed with the RSA public key's PEM
            (k.sign("HS256", claims(), hs_key=k.rsa_pub), bad_sig),
            (self.k2.sign("RS256", claims()), "no key fits the token's alg and kid"),
            ("a.b", "not three dot-separated parts"),
            # a backslash may not stand in error_description (RFC 6750 3)
            (b64u(b'{"alg":"HS256","x":"\\uZZZZ"}') + "." + p + "." + s,
             "a bad /u escape (or a lone surrogate)"),
            ("A" * 20000, "the token is too long"),
        ]
        for tok, why in cases:
            with self.subTest(why=why, tok=tok[:40]):
                self.refused("/api/x", [bearer(tok)], why)
        self.refused("/api/x", [("Authorization", "Bearer !!!")],
                     "the Authorization field is not one Bearer token")
        self.refused("/api/x", [bearer(good), bearer(good)], "more than one Authorization field")
        # the route without a secret refuses HS256 whatever the key
        self.refused("/rsa", [bearer(k.sign("HS256", claims(), hs_key=k.rsa_pub))],
                     "the token's alg is not among the policy's algorithms", realm="RSA only")
        r = self.get("/rsa", [bearer(k.sign("RS256", claims(iss="any", aud="any")))])
        self.assertEqual(r.status, 200, r)

    def test_tokens_not_logged(self):
        tok = self.k.sign("HS256", claims(sub="logcheck"))
        self.assertEqual(self.get("/api/log", [bearer(tok)]).status, 200)
        bad = self.k.sign("HS256", claims(sub="logcheck2"), hs_key=b"y" * 40)
        self.assertEqual(self.get("/api/log2", [bearer(bad)]).status, 401)

        def logged():
            try:
                with open(self.log) as f:
                    text = f.read()
            except OSError:
                return None
            return text if "/api/log2" in text else None
        text = wait_for(logged, what="the access-log lines")
        for t in (tok, bad):
            self.assertNotIn(t.split(".")[2], text)
            self.assertNotIn(t.split(".")[1], text)

    def test_rotation_by_push(self):
        old = self.k.sign("RS256", claims())
        new = self.k2.sign("RS256", claims())
        self.assertEqual(self.get("/rot", [bearer(old)]).status, 200)
        self.assertEqual(self.get("/rot", [bearer(new)]).status, 401)
        try:
            self.k2.write(self.rot)
            r = self.api.put("/config", self.cfg)  # the same text: the file's bytes differ
            self.assertEqual(r.status, 200, r)
            wait_for(lambda: self.get("/rot", [bearer(new)]).status == 200,
                     what="the rotated key set")
            self.assertEqual(self.get("/rot", [bearer(old)]).status, 401)
        finally:
            self.k.write(self.rot)
            self.assertEqual(self.api.put("/config", self.cfg).status, 200)

    def test_bad_definitions_refused_at_their_paths(self):
        garbage = self.tmp.file("garbage.json")
        with open(garbage, "w") as f:
            f.write('{"keys": [{"kty": "RSA", "n": "!!", "e": "AQAB"}]}')
        short = self.tmp.file("short.secret")
        with open(short, "w") as f:
            f.write("too-short\n")
        base = {"type": "jwt", "jwks_file": self.jwks}
        cases = [
            ({"type": "jwt", "jwks_file": "/nonexistent/jwks.json"}, "/policies/p/jwks_file",
             "/nonexistent/jwks.json"),
            ({"type": "jwt", "jwks_file": garbage}, "/policies/p/jwks_file", "/keys/0/n"),
            ({"type": "jwt", "hs256_secret_file": short}, "/policies/p/hs256_secret_file",
             "at least 32"),
            ({"type": "jwt", "jwks_url": "http://id.example/jwks"}, "/policies/p/jwks_url",
             "not an https:// URL"),
            ({"type": "jwt", "issuer": ISS}, "/policies/p", "has no key"),
            (dict(base, algorithms=["none"]), "/policies/p/algorithms/0", "never"),
            (dict(base, algorithms=[]), "/policies/p/algorithms", None),
            (dict(base, leeway_s=100000), "/policies/p/leeway_s", None),
            (dict(base, audiences="api"), "/policies/p/audiences", None),
            (dict(base, claims_to_headers={"sub": "Host"}), "/policies/p/claims_to_headers/sub",
             None),
            (dict(base, claims_to_headers={"sub": "Transfer-Encoding"}),
             "/policies/p/claims_to_headers/sub", None),
            (dict(base, claims_to_headers={"sub": "Bad Name"}),
             "/policies/p/claims_to_headers/sub", None),
            (dict(base, claims_to_headers={"sub": "X-A", "name": "x-a"}),
             "/policies/p/claims_to_headers/name", None),
            (dict(base, isuser=ISS), "/policies/p/isuser", None),
        ]
        for pol, path, hint in cases:
            with self.subTest(path=path, hint=hint):
                new = json.loads(json.dumps(self.cfg))
                new["policies"] = dict(new["policies"], p=pol)
                new["routes"] = new["routes"] + [
                    {"id": "p", "path": "/p", "upstream": "b", "policies": ["p"]}]
                self.refused_at(new, path, hint)
        # a second authentication policy on a route
        new = json.loads(json.dumps(self.cfg))
        new["routes"][0]["policies"] = ["tokens", "rsaonly"]
        self.refused_at(new, "/routes/0/policies/1", "at most one authentication policy")
        # the live config still serves
        r = self.get("/api/x", [bearer(self.k.sign("HS256", claims()))])
        self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    main()
