#!/usr/bin/python3
"""h2_backend.py - an HTTP/2 server for the end-to-end tests of HTTP/2
upstream pools (python3-h2 on asyncio; run under /usr/bin/python3).

One process per server. It listens on 127.0.0.1 with cleartext HTTP/2 by
prior knowledge ("h2c"), or with --cert/--key over TLS, where ALPN offers
--alpn (h2 by default; "http/1.1" makes a server that answers HTTP/1.1
only, to show a pool of protocol "h2" refusing it). A second port, the
control port, speaks plain HTTP/1.1 with JSON for the test.

    h2_backend.py --listen 127.0.0.1:PORT --control 127.0.0.1:PORT
                  --port-file FILE [--max-streams N] [--cert C --key K]
                  [--alpn h2|http/1.1]

Each request's answer is chosen by its query string (defaults from the
control's "defaults"):
  status=N        the status (200); 204 and 304, and HEAD, have no body
  size=N          a body of N bytes of harness.PATTERN; without it, a JSON
                  echo of the request (method, path, authority, fields,
                  body_bytes, body_sha256, trailers, conn, stream)
  nolength=1      no content-length field
  type=T          the content-type of a size=N body (application/octet-stream)
  h=NAME:VALUE    a response field (repeatable)
  trailers=N:V,.. trailer fields after the body
  delay=S         seconds before the response head (after the request body)
  body_delay=S    seconds between the head and the body

Control (GET or POST to the control port; a POST body is JSON):
  GET  /log    {"requests": [...], "conns": [...], "inflight", "peak"}: every
               stream as received (method, path, authority, scheme, fields,
               body_bytes, body_sha256, trailers, conn, stream, outcome:
               "answered", "refused", "over_limit", "ignored" (above a
               GOAWAY's last stream id), "reset" (by the client), "open");
               "conns": id, alpn, peak, streams, goaway_last; "http1": the
               connections that chose http/1.1 ("line": the request line
               when one came)
  POST /reset  forgets the streams, the peaks and the connections closed
  POST /set    {"refuse": N}: the next N streams get RST_STREAM(REFUSED_STREAM)
               at their HEADERS; {"goaway_at": N}: requests are held until a
               connection has N streams in flight, then it sends GOAWAY
               (NO_ERROR) with the last stream id of the lower half of them,
               answers that half, ignores the rest (never processed) and
               closes when its answered streams are done; {"defaults": {..}}
               query parameters for every request; {"max_streams": N}: the
               SETTINGS_MAX_CONCURRENT_STREAMS of new connections;
               {"settings_delay": S}: a new connection's SETTINGS go S seconds
               after the accept (what the client sent meanwhile is read then)

A stream beyond the advertised SETTINGS_MAX_CONCURRENT_STREAMS of its
connection (the client may not have seen them yet) is refused as nghttp2's
server does (RFC 9113 5.1.2), logged "over_limit". "peak" is the most
streams in process at once over all connections (each connection's own in
"conns"). Every wait is bounded.

The test side is the class H2Backend below (start, log, set, reset, kill).
"""
import argparse
import asyncio
import collections
import hashlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import GoAwayFrame

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

WAIT = 60  # the longest any stream waits for anything (seconds)
_BLOCK = harness.PATTERN * (1 << 14)  # 1 MiB, a whole number of periods


def pattern_chunk(off, n):
    """<n> (<= 1 MiB) bytes of the pattern body from offset <off>."""
    s = off % len(harness.PATTERN)
    return (_BLOCK + harness.PATTERN)[s:s + n] if s + n > len(_BLOCK) else _BLOCK[s:s + n]


# ---------------------------------------------------------------------------
# the server


class Server:
    def __init__(self, max_streams):
        self.max_streams = max_streams
        self.defaults = {}
        self.refuse = 0
        self.goaway_at = 0
        self.settings_delay = 0.0
        self.reset_log()

    def reset_log(self):
        """Forgets the streams, the peaks and the connections closed."""
        self.requests = []
        self.conns = [c for c in getattr(self, "conns", []) if not c.done]
        for c in self.conns:
            c.info["peak"] = c.inflight
            c.info["streams"] = 0
        self.inflight = sum(c.inflight for c in self.conns)
        self.peak = self.inflight

    def log(self):
        return {"requests": [st.rec for st in self.requests], "conns": [c.info for c in self.conns],
                "inflight": self.inflight, "peak": self.peak}


class Stream:
    def __init__(self, conn, sid, headers):
        self.conn, self.sid = conn, sid
        fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        pseudo = {k: v for k, v in fields if k.startswith(":")}
        self.rec = {"conn": conn.info["id"], "stream": sid, "method": pseudo.get(":method"),
                    "path": pseudo.get(":path"), "authority": pseudo.get(":authority"),
                    "scheme": pseudo.get(":scheme"), "fields": [[k, v] for k, v in fields
                                                                if not k.startswith(":")],
                    "body_bytes": 0, "body_sha256": None, "trailers": [], "outcome": "open",
                    "t0": time.monotonic()}
        self.sha = hashlib.sha256()
        self.ended = asyncio.Event()
        self.window = asyncio.Event()
        self.release = asyncio.Event()  # a held request goes on
        self.task = None
        self.counted = False

    def query(self, defaults):
        q = dict(defaults)
        hs = list(defaults.get("h", []))
        path = self.rec["path"] or "/"
        for k, v in urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query,
                                           keep_blank_values=True):
            if k == "h":
                hs.append(v)
            else:
                q[k] = v
        q["h"] = hs
        return q


class Conn:
    def __init__(self, srv, reader, writer, cid, alpn):
        self.srv, self.reader, self.writer = srv, reader, writer
        self.info = {"id": cid, "alpn": alpn, "peak": 0, "streams": 0, "goaway_last": None}
        self.streams = {}  # sid -> Stream, those in process
        self.inflight = 0
        self.max_streams = srv.max_streams
        self.goaway_last = None
        self.closing = False
        self.done = False
        # h2's own checks of what it receives stay on (pseudo-fields first,
        # no connection-specific fields): a strict server, as nghttp2 and
        # Go's are; normalizing is off so that the fields are seen as sent
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                        validate_inbound_headers=True,
                                        normalize_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(cfg)
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536})

    async def flush(self):
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)
            await self.writer.drain()

    def send_raw(self, data):
        """Bytes outside h2's state machine (a GOAWAY that keeps the
        connection open for the streams at or below its last id)."""
        self.writer.write(self.h2.data_to_send() + data)

    async def run(self):
        if self.srv.settings_delay:  # a server slow to send its SETTINGS (nothing read meanwhile)
            await asyncio.sleep(self.srv.settings_delay)
        self.h2.initiate_connection()
        # h2 would end the whole connection at a stream over its own limit:
        # the limit is kept here instead (new_stream), as nghttp2's server does
        self.h2.local_settings._settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = \
            collections.deque([1 << 20])
        await self.flush()
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    self.info["error"] = repr(e)
                    await self.flush()
                    break
                for ev in events:
                    self.event(ev)
                await self.flush()
                if self.closing and not self.streams:
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for st in list(self.streams.values()):
                self.finish(st, "reset" if st.rec["outcome"] == "open" else st.rec["outcome"])
                if st.task:
                    st.task.cancel()
            self.done = True
            self.info["closed"] = True
            self.writer.close()

    # ---- events

    def event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.new_stream(ev.stream_id, ev.headers, ev.stream_ended is not None)
        elif isinstance(ev, h2.events.DataReceived):
            if ev.flow_controlled_length:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            st = self.streams.get(ev.stream_id)
            if st:
                st.rec["body_bytes"] += len(ev.data)
                st.sha.update(ev.data)
        elif isinstance(ev, h2.events.TrailersReceived):
            st = self.streams.get(ev.stream_id)
            if st:
                st.rec["trailers"] = [[k.decode("latin-1"), v.decode("latin-1")]
                                      for k, v in ev.headers]
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.get(ev.stream_id)
            if st:
                st.ended.set()
        elif isinstance(ev, h2.events.StreamReset):
            st = self.streams.get(ev.stream_id)
            if st:
                st.rec["reset_code"] = int(ev.error_code)
                self.finish(st, "reset")
                if st.task:
                    st.task.cancel()
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            for st in self.streams.values():
                st.window.set()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.closing = True

    def new_stream(self, sid, headers, ended):
        srv = self.srv
        st = Stream(self, sid, headers)
        srv.requests.append(st)
        self.info["streams"] += 1
        if self.goaway_last is not None and sid > self.goaway_last:
            st.rec["outcome"] = "ignored"  # never processed: the client retries it
            return
        if srv.refuse > 0:
            srv.refuse -= 1
            st.rec["outcome"] = "refused"
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        if self.inflight >= self.max_streams:
            st.rec["outcome"] = "over_limit"
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        self.streams[sid] = st
        st.counted = True
        self.inflight += 1
        srv.inflight += 1
        self.info["peak"] = max(self.info["peak"], self.inflight)
        srv.peak = max(srv.peak, srv.inflight)
        if ended:
            st.ended.set()
        st.task = asyncio.get_running_loop().create_task(self.answer(st))
        if srv.goaway_at:
            st.rec["held"] = True
            if self.inflight >= srv.goaway_at:
                self.goaway()

    def goaway(self):
        """A graceful GOAWAY below the streams in flight: the lower half is
        answered, the rest was never processed (RFC 9113 6.8)."""
        self.srv.goaway_at = 0
        ids = sorted(self.streams)
        last = ids[len(ids) // 2 - 1] if len(ids) > 1 else 0
        self.goaway_last = last
        self.info["goaway_last"] = last
        self.send_raw(GoAwayFrame(0, last_stream_id=last, error_code=0).serialize())
        for sid in ids:
            st = self.streams[sid]
            if sid > last:
                self.finish(st, "ignored")
                st.task.cancel()
            else:
                st.release.set()
        self.closing = True

    def finish(self, st, outcome):
        st.rec["outcome"] = outcome
        st.rec["t1"] = time.monotonic()
        if st.counted:
            st.counted = False
            self.inflight -= 1
            self.srv.inflight -= 1
        self.streams.pop(st.sid, None)
        if self.closing and not self.streams and self.goaway_last is not None:
            # the answered half is done: the final GOAWAY, then the close
            self.h2.close_connection(last_stream_id=self.goaway_last)
            self.writer.write(self.h2.data_to_send())
            self.writer.close()

    # ---- answers

    async def answer(self, st):
        try:
            await self._answer(st)
        except asyncio.CancelledError:
            pass
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError, ConnectionError,
                OSError, asyncio.TimeoutError) as e:
            st.rec["error"] = repr(e)
            if st.sid in self.streams:
                self.finish(st, "reset")

    async def _answer(self, st):
        if st.rec.get("held"):
            await asyncio.wait_for(st.release.wait(), WAIT)
        await asyncio.wait_for(st.ended.wait(), WAIT)
        st.rec["body_sha256"] = st.sha.hexdigest()
        q = st.query(self.srv.defaults)
        if float(q.get("delay", 0)):
            await asyncio.sleep(float(q["delay"]))
        status = int(q.get("status", 200))
        method = st.rec["method"]
        nobody = method == "HEAD" or status in (204, 304)
        if "size" in q:
            size, body = int(q["size"]), None
            ctype = q.get("type", "application/octet-stream")
        else:
            rec = {k: st.rec[k] for k in ("method", "path", "authority", "scheme", "fields",
                                          "body_bytes", "body_sha256", "trailers", "conn",
                                          "stream")}
            body = json.dumps(rec).encode()
            size, ctype = len(body), "application/json"
        fields = [(":status", str(status)), ("content-type", ctype)]
        if status not in (204, 304) and not q.get("nolength"):
            fields.append(("content-length", str(size)))
        for h in q["h"]:
            k, _, v = h.partition(":")
            fields.append((k.strip().lower(), v.strip()))
        trailers = []
        for t in filter(None, q.get("trailers", "").split(",")):
            k, _, v = t.partition(":")
            trailers.append((k.strip().lower(), v.strip()))
        if nobody:
            self.h2.send_headers(st.sid, fields, end_stream=True)
        else:
            self.h2.send_headers(st.sid, fields, end_stream=not size and not trailers)
        await self.flush()
        if not nobody and (size or trailers):
            if float(q.get("body_delay", 0)):
                await asyncio.sleep(float(q["body_delay"]))
            await self.send_body(st, size, body, end=not trailers)
            if trailers:
                self.h2.send_headers(st.sid, trailers, end_stream=True)
                await self.flush()
        self.finish(st, "answered")

    async def send_body(self, st, size, body, end):
        off = 0
        while off < size:
            try:
                win = self.h2.local_flow_control_window(st.sid)
            except h2.exceptions.StreamClosedError:
                raise
            n = min(win, self.h2.max_outbound_frame_size, size - off)
            if n <= 0:
                st.window.clear()
                await asyncio.wait_for(st.window.wait(), WAIT)
                continue
            chunk = body[off:off + n] if body is not None else pattern_chunk(off, n)
            off += n
            self.h2.send_data(st.sid, chunk, end_stream=end and off == size)
            await self.flush()


async def serve_http1(srv, reader, writer, cid):
    """A TLS connection that chose http/1.1 by ALPN: each request is
    answered 200 "http/1.1 here" over HTTP/1.1."""
    rec = {"conn": cid, "proto": "http/1.1", "outcome": "answered"}
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        rec["line"] = head.split(b"\r\n", 1)[0].decode("latin-1")
        body = b"http/1.1 here\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                     % (len(body), body))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
            ConnectionError, OSError):
        rec["outcome"] = "reset"
    finally:
        srv.http1.append(rec)
        writer.close()


async def control(srv, reader, writer):
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        line = head.split(b"\r\n", 1)[0].decode()
        method, path, _ = line.split(" ", 2)
        n = 0
        for ln in head.split(b"\r\n")[1:]:
            if ln.lower().startswith(b"content-length:"):
                n = int(ln.split(b":", 1)[1])
        body = json.loads(await reader.readexactly(n)) if n else {}
        if path == "/log":
            out = srv.log()
            out["http1"] = srv.http1
        elif path == "/reset":
            srv.reset_log()
            srv.http1 = []
            out = {}
        elif path == "/set":
            for k in ("refuse", "goaway_at", "max_streams"):
                if k in body:
                    setattr(srv, k, int(body[k]))
            if "settings_delay" in body:
                srv.settings_delay = float(body["settings_delay"])
            if "defaults" in body:
                srv.defaults = body["defaults"]
            out = {}
        else:
            raise ValueError(path)
        data, status = json.dumps(out).encode(), b"200 OK"
    except Exception as e:  # the test sees what went wrong
        data, status = repr(e).encode(), b"400 Bad Request"
    writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (status, len(data), data))
    try:
        await writer.drain()
    finally:
        writer.close()


async def serve(args):
    srv = Server(args.max_streams)
    srv.http1 = []
    ids = iter(range(1, 1 << 30))
    ctx = None
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(args.alpn.split(","))

    async def on_conn(reader, writer):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = writer.get_extra_info("ssl_object")
        alpn = tls.selected_alpn_protocol() if tls else None
        cid = next(ids)
        if tls and alpn != "h2":
            await serve_http1(srv, reader, writer, cid)
            return
        conn = Conn(srv, reader, writer, cid, alpn)
        srv.conns.append(conn)
        await conn.run()

    host, port = args.listen.rsplit(":", 1)
    chost, cport = args.control.rsplit(":", 1)
    main = await asyncio.start_server(on_conn, host, int(port), ssl=ctx, reuse_address=True)
    ctl = await asyncio.start_server(lambda r, w: control(srv, r, w), chost, int(cport),
                                     reuse_address=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % main.sockets[0].getsockname()[1])
    os.rename(tmp, args.port_file)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with main, ctl:
        await stop.wait()


def server_main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--max-streams", type=int, default=100)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--alpn", default="h2")
    asyncio.run(serve(ap.parse_args()))


# ---------------------------------------------------------------------------
# the test side


class H2Backend(harness.Backend):
    """One h2_backend.py process on 127.0.0.1 (ports from free_port(), kept
    across restart(); stop(), alive() and stderr() are harness.Backend's).
    <tls>: {"cert", "key"} for TLS; <alpn>: what ALPN offers then."""

    def __init__(self, tmp, name, max_streams=100, tls=None, alpn="h2"):
        super().__init__(tmp, name, port=harness.free_port())
        self.max_streams, self.tls, self.alpn = max_streams, tls, alpn
        self.control_port = harness.free_port()

    def start(self):
        pf = self.tmp.file("h2backend-%s.port" % self.name)
        if os.path.exists(pf):
            os.unlink(pf)
        args = ["/usr/bin/python3", os.path.join(HERE, "h2_backend.py"), "--listen", self.addr,
                "--control", "127.0.0.1:%d" % self.control_port, "--port-file", pf,
                "--max-streams", str(self.max_streams)]
        if self.tls:
            args += ["--cert", self.tls["cert"], "--key", self.tls["key"], "--alpn", self.alpn]
        err = open(self.tmp.file("backend-%s.err" % self.name), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                                     start_new_session=True)
        err.close()
        harness._live.append(self.proc)
        harness.wait_port_file(self.proc, pf, "h2 backend %s" % self.name, self.stderr)
        return self

    def kill(self):
        return self.stop(signal.SIGKILL)

    def _control(self, path, body=None):
        c = harness.Client(self.control_port)
        try:
            c.send(harness.build_request("POST" if body is not None else "GET", path,
                                         [("Connection", "close")],
                                         json.dumps(body).encode() if body is not None else None))
            r = c.read_response()
        finally:
            c.close()
        assert r.status == 200, (path, r.status, r.body)
        return json.loads(r.body)

    def log(self):
        return self._control("/log")

    def reset(self):
        return self._control("/reset", {})

    def set(self, **kw):
        return self._control("/set", kw)

    def requests(self, outcome=None):
        """The streams logged (those of <outcome> only, when given)."""
        return [r for r in self.log()["requests"] if outcome is None or r["outcome"] == outcome]


if __name__ == "__main__":
    server_main()
