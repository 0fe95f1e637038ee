#!/usr/bin/env python3
"""The component map of src/ and what may include what: each component
includes headers of the components below it (and include/abi/), never one
above. So no include or call cycle crosses a component. Also: at most
about 20 .c files and one *_internal.h per folder. Prints what it checked;
exits 1 with the offending lines otherwise."""
import os
import re
import sys

# Lowest first; the Makefile's COMPONENTS lists them in the same order.
ORDER = ["lib", "policy", "judge", "telemetry", "health", "sandbox", "interp", "control", "node", "artifact", "exec", "pool", "executor", "session", "serve", "agent", "cli"]
MAX_C_FILES = 20

src = "src"
bad = []
edges = set()
for comp in sorted(os.listdir(src)):
    d = os.path.join(src, comp)
    if comp not in ORDER:
        bad.append("%s: not a known component (add it to ORDER and the Makefile)" % d)
        continue
    files = [f for f in os.listdir(d) if f.endswith((".c", ".h"))]
    n_c = sum(f.endswith(".c") for f in files)
    internal = [f for f in files if f.endswith("_internal.h")]
    if n_c > MAX_C_FILES:
        bad.append("%s: %d .c files (at most %d)" % (d, n_c, MAX_C_FILES))
    if len(internal) > 1:
        bad.append("%s: %d *_internal.h headers (at most one): %s" % (d, len(internal), internal))
    for f in files:
        with open(os.path.join(d, f)) as fh:
            for no, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
                if not m or m.group(1) == "abi":
                    continue
                other = m.group(1)
                if other not in ORDER:
                    bad.append("%s/%s:%d: includes from unknown folder %s" % (d, f, no, other))
                elif ORDER.index(other) > ORDER.index(comp):
                    bad.append("%s/%s:%d: %s includes %s, which is above it" % (d, f, no, comp, other))
                elif other != comp:
                    edges.add((comp, other))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("%d component dependencies, all downwards: %s" % (
    len(edges), ", ".join("%s->%s" % e for e in sorted(edges, key=lambda e: (ORDER.index(e[0]), ORDER.index(e[1]))))))
