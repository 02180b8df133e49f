#!/usr/bin/env python3
"""run_examples.py - runs the shell examples of README.md and docs/, as a reader would.

Every ```sh block in those files carries a marker, an HTML comment on the line
just before its fence (GitHub shows neither):

  <!-- doc-test -->                 run it
  <!-- doc-test: wait 8080 9901 -->  run it, then wait until 127.0.0.1 accepts on
                                    each port (the servers it started in the
                                    background are up)
  <!-- doc-test: expect TEXT -->     run it, and its output must hold TEXT
                                    (directives join with ';': wait 3000; expect ok)
  <!-- doc-test: skip: REASON -->   do not run it (the set-up, a load test, root)

A block without a marker fails this test, so no example goes unaccounted for.
A comment of its own whose first line is `<!-- doc-test: hidden` (with the same
directives after it) holds commands run at that point and shown to nobody: what
the reader does elsewhere, such as starting Switchyard in another terminal.
`<!-- doc-test: after FILE -->` anywhere in a file runs FILE's blocks first, in
the same session: a guide goes on from getting-started.md, which goes on from
the README.

A file's blocks run in order in one session, as in one terminal: each block is
a `bash -euo pipefail` script that starts in the directory and with the
exported variables the one before it left, and a server it starts with `&`
runs on until the file is done. Each file runs in a scratch directory holding
links to the source tree's top-level entries, and `build` to the build under
test, so `$PWD/build/gateway` is that build; HOME and XDG_STATE_HOME are in
the scratch directory too (with a .curlrc that turns curl's progress meter
off: curl shows none when it writes to a terminal). Before a block runs, every port an address in the
file names (127.0.0.1:8080, localhost:8443, 0.0.0.0:8080) is replaced, wherever
that number stands alone, by a free one of its own, and every /tmp/ by the
scratch directory's tmp/: files run side by side and beside other tests, and
leave nothing behind. Each block has 120 s; at the end of a file, or at its
first failure, every process its blocks started is stopped (SIGTERM, then
SIGKILL), and a sanitizer's report in anything they wrote fails the file.

The examples must call the binaries by name, `switchyard` and
`switchyard-route` (getting-started.md puts build/ on PATH); only the README's
set-up command and hidden blocks may name build/gateway/switchyard.

Usage: run_examples.py SOURCE_DIR BUILD_DIR [FILE...]   (default: README.md and docs/)
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from harness import free_port  # noqa: E402  (the counter every test process shares)

BLOCK_SECONDS = 120
WAIT_SECONDS = 30
MARK = re.compile(r"<!--\s*doc-test\s*(?::\s*(.*?))?\s*-->\s*$")
HIDDEN = re.compile(r"<!--\s*doc-test:\s*hidden\b([^\n]*)\n(.*?)^-->\s*$", re.S | re.M)
AFTER = re.compile(r"<!--\s*doc-test:\s*after\s+(\S+)\s*-->")
PORT = re.compile(r"(?:127\.0\.0\.\d+|localhost|0\.0\.0\.0|\[::1?\]):(\d{2,5})\b")
BINARY_PATH = re.compile(r"build/(?:gateway|router)/switchyard")
SANITIZER = re.compile(r"ERROR: (?:Address|Leak)Sanitizer[^\n]*|runtime error:[^\n]*|"
                       r"WARNING: ThreadSanitizer[^\n]*")


class Block:
    def __init__(self, path, line, text, directives, hidden=False):
        self.path, self.line, self.text, self.hidden = path, line, text, hidden
        self.skip = None
        self.waits, self.expects = [], []
        directives = (directives or "").strip()
        if directives.startswith("skip"):
            self.skip = directives[4:].strip(": ")
            if not self.skip:
                raise ValueError("%s:%d: a skip says why: skip: REASON" % (path, line))
            directives = ""
        for d in filter(None, (s.strip() for s in directives.split(";"))):
            word, _, rest = d.partition(" ")
            if word == "wait":
                self.waits += [int(p) for p in rest.split()]
            elif word == "expect":
                self.expects.append(rest.strip())
            else:
                raise ValueError("%s:%d: unknown doc-test directive %r" % (path, line, d))

    def where(self):
        return "%s:%d" % (self.path, self.line)


def parse(path, problems):
    """The blocks of <path> in order (hidden ones included), and its `after` file."""
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    blocks, fence, i = [], None, 0
    hidden_at = {text[:m.start()].count("\n") + 1: m for m in HIDDEN.finditer(text)}
    after = AFTER.search(text)
    while i < len(lines):
        line = lines[i]
        if fence is None and i + 1 in hidden_at:
            m = hidden_at[i + 1]
            blocks.append(Block(path, i + 1, m.group(2), m.group(1), hidden=True))
            i += m.group(0).count("\n") + 1
            continue
        m = re.match(r"(```+)(\S*)", line)
        if m and fence is None:
            start, fence, info = i, m.group(1), m.group(2)
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith(fence):
                body.append(lines[i])
                i += 1
            fence = None
            if info == "sh":
                mark = MARK.match(lines[start - 1]) if start else None
                where = "%s:%d" % (path, start + 1)
                if not mark:
                    problems.append("%s: a sh block without a doc-test marker (run it, or say "
                                    "why not: <!-- doc-test: skip: REASON -->)" % where)
                else:
                    try:
                        blocks.append(Block(path, start + 1, "\n".join(body), mark.group(1)))
                    except ValueError as e:
                        problems.append(str(e))
        i += 1
    after_path = os.path.normpath(os.path.join(os.path.dirname(path), after.group(1))) if after else None
    return blocks, after_path


def lint(path, blocks, problems):
    """One binary path: the binaries by name, but in the README's set-up and hidden blocks."""
    for b in blocks:
        if b.hidden or (os.path.basename(path) == "README.md" and b.skip):
            continue
        for n, line in enumerate(b.text.split("\n")):
            if BINARY_PATH.search(line):
                problems.append("%s:%d: calls %s: call it by name (getting-started.md puts "
                                "build/ on PATH)" % (path, b.line + 1 + n, BINARY_PATH.search(line).group(0)))


def chain(path, seen=()):
    """<path>'s blocks after those of the files it goes on from."""
    problems = []
    blocks, after = parse(path, problems)
    if after and not os.path.exists(after):
        return [], problems + ["%s: doc-test: after %s: no such file" % (path, after)]
    if after in seen or after == path:
        return [], problems + ["%s: doc-test: after %s makes a loop" % (path, after)]
    before = chain(after, seen + (path,))[0] if after else []
    return before + blocks, problems


def port_map(blocks):
    ports = {}
    for b in blocks:
        for p in PORT.findall(b.text):
            if int(p) not in ports:
                ports[int(p)] = free_port()
        for p in b.waits:
            if p not in ports:
                ports[p] = free_port()
    return ports


def substitute(text, ports, tmp):
    for p, q in ports.items():
        text = re.sub(r"(?<![\d.])%d(?!\d)" % p, str(q), text)
    return re.sub(r"(?<![\w./-])/tmp/", tmp + "/", text)


def listening(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def kill_groups(groups):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try:
                os.killpg(g, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            alive = []
            for g in groups:
                try:
                    os.killpg(g, 0)
                    alive.append(g)
                except ProcessLookupError:
                    pass
            if not alive:
                return
            time.sleep(0.1)


def scratch(src, build):
    top = tempfile.mkdtemp(prefix="sy-doc-")
    work = os.path.join(top, "work")
    for d in ("work", "tmp", "home", "state"):
        os.makedirs(os.path.join(top, d))
    for name in os.listdir(src):
        if name != "build" and not name.startswith(".git"):
            os.symlink(os.path.join(src, name), os.path.join(work, name))
    os.symlink(os.path.abspath(build), os.path.join(work, "build"))
    return top, work


def run_file(src, build, path):
    """Runs one file's chain; returns a list of failures (empty: it passed)."""
    blocks, problems = chain(path)
    lint(path, parse(path, [])[0], problems)
    if problems:
        return problems
    own = [b for b in blocks if b.path == path]
    if not any(not b.skip for b in own):
        return []
    top, work = scratch(src, build)
    tmp = os.path.join(top, "tmp")
    ports = port_map([b for b in blocks if not b.skip])
    env = dict(os.environ, HOME=os.path.join(top, "home"),
               XDG_STATE_HOME=os.path.join(top, "state"), TMPDIR=tmp)
    with open(os.path.join(top, "home", ".curlrc"), "w") as f:
        f.write("no-progress-meter\n")  # a terminal shows none; a log would hold one a call
    state = os.path.join(top, "env.sh")
    with open(state, "w") as f:
        f.write("cd %s\n" % work)
    groups, failures, outputs = [], [], []
    try:
        for n, b in enumerate(blocks):
            if b.skip:
                continue
            out_path = os.path.join(top, "block%d.out" % n)
            script = ("set -euo pipefail\nsource %s\n"
                      "trap '{ export -p; echo cd \"$(printf %%q \"$PWD\")\"; } > %s' EXIT\n%s\n"
                      % (state, state, substitute(b.text, ports, tmp)))
            with open(out_path, "w") as out:
                p = subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
                groups.append(p.pid)
                try:
                    rc = p.wait(timeout=BLOCK_SECONDS)
                except subprocess.TimeoutExpired:
                    rc = "timed out after %d s" % BLOCK_SECONDS
            outputs.append((b, out_path))
            text = open(out_path, errors="replace").read()
            why = None
            if rc != 0:
                why = "exit status %s" % rc
            for e in b.expects:
                if why is None and substitute(e, ports, tmp) not in text:
                    why = "its output lacks %r" % e
            for w in b.waits:
                deadline = time.monotonic() + WAIT_SECONDS
                while why is None and not listening(ports[w]):
                    if time.monotonic() > deadline:
                        why = "nothing listens on %d (the example's %d) after %d s" % (
                            ports[w], w, WAIT_SECONDS)
                    time.sleep(0.1)
            if why:
                failures.append("%s%s: %s" % (b.where(), " (hidden)" if b.hidden else "", why))
                break
    finally:
        kill_groups(groups)
    for b, out_path in outputs:  # servers write into their block's output until they exit
        m = SANITIZER.search(open(out_path, errors="replace").read())
        if m and not failures:
            failures.append("%s: a process it started reported %r" % (b.where(), m.group(0)))
    if failures:
        lines = ["ports: " + ", ".join("%d->%d" % kv for kv in sorted(ports.items()))]
        for b, out_path in outputs:
            lines.append("--- %s output:" % b.where())
            lines += open(out_path, errors="replace").read().splitlines()[-40:]
        failures.append("\n".join(lines))
    shutil.rmtree(top, ignore_errors=True)
    return failures


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    files = sys.argv[3:] or [os.path.join(src, "README.md")] + sorted(
        glob.glob(os.path.join(src, "docs", "**", "*.md"), recursive=True))
    failed, ran = 0, 0
    for f in files:
        t0 = time.monotonic()
        failures = run_file(src, build, os.path.abspath(f))
        name = os.path.relpath(f, src)
        nrun = sum(1 for b in parse(os.path.abspath(f), [])[0] if not b.skip)
        ran += nrun
        print("%-45s %s (%d blocks, %.1f s)" % (name, "FAILED" if failures else "ok", nrun,
                                                time.monotonic() - t0), flush=True)
        for x in failures:
            print(x)
        failed += bool(failures)
    print("%d files, %d blocks of their own run; %d files failed" % (len(files), ran, failed))
    if ran < 10 and not sys.argv[3:]:  # the docs mark far more: the reading broke
        print("too few blocks run: this test no longer reads the markers")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
