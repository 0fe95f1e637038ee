#!/usr/bin/env python3
"""The deepest stack a serve worker can need, from the compiler's own
figures: every object built with -fcallgraph-info=su (a .ci file beside each
.o: each function's frame and its calls). A request runs whole on its
worker thread, whose stack is SG_SERVE_WORKER_STACK (256 KiB,
src/serve/serve_http.h); a frame of 128 KiB in a session list and 64 KiB in
the output pump once left a session step 40 KiB to spare.

The walk starts at the worker's function, follows direct calls, and at the
endpoints' indirect calls (`ep->prepare(...)`, `X_endpoint.execute(...)`)
every endpoint function. A recursion is counted once: the recursive walks
bound their own depth (sandbox_scratch.c, py_equal.c), and so does a
request body (64 levels, serve_route.c's check_shape(), for jansson's
recursive parse, encode and free, ~300 bytes a level). What it cannot see
(other indirect calls, the libraries' and libc's own frames) is why the
bound is half the stack.

Usage: worker_stack.py OBJDIR SRCDIR   (exit 1 over the bound, with the path)
"""
import collections
import glob
import os
import re
import sys

NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)" label: "([^"]+)"')
ROOT = "src/serve/serve_http.c:worker"


def load(objdir):
    """Each function's frame (bytes) and its calls [(callee, call site)]."""
    frame, calls = {}, collections.defaultdict(list)
    for path in glob.glob(os.path.join(objdir, "**", "*.ci"), recursive=True):
        with open(path) as f:
            for line in f:
                m = NODE.match(line)
                if m:
                    size = re.search(r"\\n(\d+) bytes", m.group(2))
                    if size:
                        frame[m.group(1)] = int(size.group(1))
                    continue
                m = EDGE.match(line)
                if m:
                    calls[m.group(1)].append((m.group(2), m.group(3)))
    return frame, calls


def endpoints(srcdir):
    """The endpoints' functions (every member of each `struct
    serve_endpoint`: prepare, budget, execute, policy_error, free_plan),
    and the call sites ("file:line") that call one through the table."""
    targets, sites = set(), set()
    for path in sorted(glob.glob(os.path.join(srcdir, "src/serve/*.c"))):
        rel = os.path.relpath(path, srcdir)
        in_table = False
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if re.match(r"(const )?struct serve_endpoint \w+ = \{", line):
                    in_table = True
                elif in_table and line.startswith("};"):
                    in_table = False
                m = re.search(r"\.\w+ = (\w+),", line)
                if in_table and m:
                    targets.add(m.group(1))
                if re.search(r"(\bep->|_endpoint\.)\w+\(", line):
                    sites.add("%s:%d" % (rel, n))
    return targets, sites


def resolve(frame, srcfile, name):
    """A callee's node: static in the caller's file, else global."""
    if srcfile + ":" + name in frame:
        return srcfile + ":" + name
    return name if name in frame else None


def main():
    objdir, srcdir = sys.argv[1], sys.argv[2]
    with open(os.path.join(srcdir, "src/serve/serve_http.h")) as f:
        m = re.search(r"#define SG_SERVE_WORKER_STACK \((\d+)u << (\d+)\)", f.read())
    if not m:
        print("no SG_SERVE_WORKER_STACK (N << M) in src/serve/serve_http.h")
        return 1
    stack = int(m.group(1)) << int(m.group(2))
    frame, calls = load(objdir)
    targets, sites = endpoints(srcdir)
    if ROOT not in frame or not targets or not sites:
        print("cannot walk: no %s in %s, or no endpoint found" % (ROOT, objdir))
        return 1
    memo = {}

    def worst(fn, active):
        if fn in memo:
            return memo[fn]
        if fn in active:
            return 0, []
        active.add(fn)
        srcfile = fn.rsplit(":", 1)[0] if ":" in fn else ""
        best = (0, [])
        for callee, site in calls.get(fn, ()):
            site = ":".join(site.split(":")[:2])
            names = targets if callee == "__indirect_call" and site in sites else [callee]
            for name in names:
                node = resolve(frame, srcfile, name) or resolve(frame, "", name)
                if not node:
                    for t in frame:  # a static execute function of another file
                        if t.endswith(":" + name):
                            node = t
                if node:
                    depth = worst(node, active)
                    if depth[0] > best[0]:
                        best = depth
        active.discard(fn)
        memo[fn] = (frame[fn] + best[0], ["%s (%d)" % (fn, frame[fn])] + best[1])
        return memo[fn]

    total, path = worst(ROOT, set())
    bound = stack // 2
    print("serve worker: the deepest known path needs %d bytes of its %d (bound %d): %s"
          % (total, stack, bound, " > ".join(path)))
    return 0 if total <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
