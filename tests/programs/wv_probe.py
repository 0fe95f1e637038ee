# Warm verifier tests: what a program can see of how it was started, as
# JSON on stderr (the result's stderr excerpt), then exit 1. Cold and warm
# must print the same (the sandbox's scratch path, which differs between
# two sandboxes, written as <scratch>).
import json
import os
import sys


def depth(n=1):
    try:
        return depth(n + 1)
    except RecursionError:
        return n


def stream(s):
    return [s.encoding, s.errors, s.line_buffering, s.write_through, s.name, s.mode,
            type(s.buffer).__name__, s is getattr(sys, "__%s__" % s.name.strip("<>"))]


main = sys.modules["__main__"]
scratch = os.getcwd()
facts = {
    "name": __name__, "argv": sys.argv, "orig_argv": sys.orig_argv[1:], "file": __file__,
    "main": main.__dict__ is globals(),
    "main_vars": [(k, type(v).__name__) for k, v in vars(main).items()],
    "loader": [type(__loader__).__module__, type(__loader__).__name__, __loader__.name,
               __loader__.path],
    "modules": sorted(sys.modules),
    "limit": sys.getrecursionlimit(), "depth": depth(),
    "stdin": stream(sys.stdin) + [sys.stdin.read()],
    "stdout": stream(sys.stdout), "stderr": stream(sys.stderr),
    "path0": sys.path[0], "path": sys.path[1:],
    "env": sorted((k, v.replace(scratch, "<scratch>")) for k, v in os.environ.items()),
    "cwd_is_home": scratch == os.environ.get("HOME"),
    "bytecode": sys.dont_write_bytecode, "flags": str(sys.flags),
    "excepthook": sys.excepthook is sys.__excepthook__,
    "frames": sys._getframe().f_code.co_name,
}
print(json.dumps(facts), file=sys.stderr)
sys.exit(1)
