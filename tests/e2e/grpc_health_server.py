#!/usr/bin/python3
"""grpc_health_server.py - a real gRPC server (Debian's python3-grpcio,
generic handlers, bytes in and out: no protoc) implementing
grpc.health.v1.Health/Check for test_health_grpc.py, run as a process of
its own so that a test can kill it.

    grpc_health_server.py PORT STATE_FILE CALLS_FILE [CERT KEY]

Each call reads STATE_FILE (JSON, written atomically by the test): a map
of service name ("" is the server as a whole) to what Check answers:
"SERVING", "NOT_SERVING" or "UNKNOWN" (HealthCheckResponse's status), or
"MALFORMED" (a message cut short), "EXTRA" (SERVING between fields the
health proto does not have) or "BIG" (SERVING after 595 bytes of them). A
service not in the map gets NOT_FOUND, as grpc's own health servicer
answers. Each call appends one JSON line to
CALLS_FILE: the service asked (decoded here by hand from the request
bytes), the user-agent, and whether a deadline came with the call.
With CERT and KEY it serves TLS (ALPN h2, as every gRPC server does).
"""
import json
import sys
import threading
from concurrent import futures

import grpc

STATUS = {"UNKNOWN": b"", "SERVING": b"\x08\x01", "NOT_SERVING": b"\x08\x02",
          "MALFORMED": b"\x08", "EXTRA": b"\x12\x03abc\x08\x01\x1d\x00\x00\x00\x00",
          "BIG": b"\x12\xd0\x04" + b"x" * 592 + b"\x08\x01"}


def varint(b, i):
    """(value, next index) of the varint at b[i]."""
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def service_of(req):
    """HealthCheckRequest.service (field 1, bytes) of <req>; "" when left out."""
    i, service = 0, b""
    while i < len(req):
        key, i = varint(req, i)
        if key & 7 == 2:
            n, i = varint(req, i)
            if key >> 3 == 1:
                service = req[i:i + n]
            i += n
        elif key & 7 == 0:
            _, i = varint(req, i)
        else:
            raise ValueError("unexpected wire type %d" % (key & 7))
    return service.decode()


def main():
    port, state_file, calls_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    lock = threading.Lock()

    def check(req, context):
        service = service_of(req)
        meta = dict(context.invocation_metadata())
        with lock, open(calls_file, "a") as f:
            f.write(json.dumps({"service": service, "user_agent": meta.get("user-agent", ""),
                                "deadline": context.time_remaining() is not None}) + "\n")
        with open(state_file) as f:
            state = json.load(f)
        if service not in state:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return STATUS[state[service]]

    handler = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=None, response_serializer=None)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    addr = "127.0.0.1:%d" % port
    if len(sys.argv) > 5:
        with open(sys.argv[4], "rb") as c, open(sys.argv[5], "rb") as k:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        server.add_secure_port(addr, creds)
    else:
        server.add_insecure_port(addr)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
