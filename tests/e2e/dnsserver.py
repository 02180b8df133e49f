"""dnsserver.py - a small UDP DNS responder for end-to-end tests (stdlib only).

Answers A (and AAAA) queries on 127.0.0.1 from a table the test changes
while it runs, in a thread of the test process:

    dns = DnsServer().start()
    dns.set("app.sy-test", ["127.0.0.2", "127.0.0.3"])   # A records
    dns.fail("app.sy-test")     # NXDOMAIN from now on
    dns.hang("app.sy-test")     # never answered (a nameserver that hangs)
    dns.queries("app.sy-test")  # how many queries for the name arrived
    dns.stop()

A name that is not in the table gets NXDOMAIN; an AAAA query for a name in
the table gets an empty NOERROR answer (the name has no IPv6 address). The
question is echoed as received, so a resolver's random letter case (0x20)
checks out. Names compare case-insensitively, without a trailing dot.
"""
import socket
import struct
import threading

NOERROR, NXDOMAIN = 0, 3
T_A, T_AAAA = 1, 28


class DnsServer:
    def __init__(self, host="127.0.0.1", port=0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.addr = "%s:%d" % (host, self.port)
        self.lock = threading.Lock()
        self.table = {}  # name -> [IPv4 text] | "fail" | "hang"
        self.counts = {}  # name -> queries received
        self.running = False
        self.thread = None

    def start(self):
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.running = False
        if self.thread:
            self.thread.join(5)
        self.sock.close()

    @staticmethod
    def _key(name):
        return name.lower().rstrip(".")

    def set(self, name, addrs):
        with self.lock:
            self.table[self._key(name)] = list(addrs)

    def fail(self, name):
        with self.lock:
            self.table[self._key(name)] = "fail"

    def hang(self, name):
        with self.lock:
            self.table[self._key(name)] = "hang"

    def queries(self, name):
        with self.lock:
            return self.counts.get(self._key(name), 0)

    def _serve(self):
        while self.running:
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            reply = self._answer(data)
            if reply:
                try:
                    self.sock.sendto(reply, peer)
                except OSError:
                    pass

    def _answer(self, data):
        if len(data) < 12:
            return None
        qid, flags, qd = struct.unpack("!HHH", data[:6])
        if qd != 1 or flags & 0x8000:
            return None
        # the question: labels, then type and class
        i, labels = 12, []
        while i < len(data) and data[i]:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        if i + 5 > len(data):
            return None
        qtype, _ = struct.unpack("!HH", data[i + 1:i + 5])
        question = data[12:i + 5]
        name = self._key(".".join(labels))
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + 1
            entry = self.table.get(name)
        if entry == "hang":
            return None
        rcode, answers = NOERROR, []
        if entry is None or entry == "fail":
            rcode = NXDOMAIN
        elif qtype == T_A:
            answers = entry
        rflags = 0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode  # QR AA RD RA
        out = struct.pack("!HHHHHH", qid, rflags, 1, len(answers), 0, 0) + question
        for a in answers:
            # a pointer to the question's name, A, IN, TTL 1 s, 4 bytes
            out += struct.pack("!HHHIH", 0xC00C, T_A, 1, 1, 4) + socket.inet_aton(a)
        return out
