# sandguard's verifier harness: runs one test of a Python program inside
# the sandbox, in-process, the way a grader that imports the program runs
# it (docs/trainer-integration.md, "Call-based tests and the LCB grader").
#
#   python3 verify_harness.py GRADER FN_NAME PROGRAM.py [ARG...]
#   python3 verify_harness.py GRADER FN_NAME -c CODE
#
# GRADER is "lcb" (LiveCodeBench's grader: its import prelude, recursion
# limit, stdin stand-ins, SystemExit handling and disabled functions) or
# "strict" (the program as `python3 PROGRAM.py` runs it: no prelude, the
# interpreter's limits). FN_NAME is "" for a stdin/stdout test, else the
# function (or the method of `class Solution`) a call-based test calls,
# with one JSON argument per line of stdin.
#
# This file runs with the program, in the same process: nothing it writes
# is trusted. It never sees the expected output; it only reports what the
# program produced, and the executor compares (src/exec/verify_judge.c).
# Its stdout is the line MARK, then the program's captured output (stdio)
# or the JSON of the function's return value (call-based). Without MARK
# the program ended the process before the harness could report: a fail.
# An exception, or a SystemExit where the grader does not absorb it, ends
# the harness with status 1 and the traceback on stderr.
import builtins
import io
import json
import os
import sys
import types

MARK = "#sandguard-harness:ok\n"

# The names LiveCodeBench's grader imports before the program, in its
# order: first every name of each module, then each module itself.
PRELUDE_STAR = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
                "random", "statistics", "itertools", "functools", "operator", "io", "sys",
                "json", "builtins", "typing")
PRELUDE_PLAIN = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
                 "random", "statistics", "itertools", "functools", "operator", "io", "sys", "json")
PRELUDE = ("".join("from %s import *\n" % m for m in PRELUDE_STAR) +
           "".join("import %s\n" % m for m in PRELUDE_PLAIN) + "sys.setrecursionlimit(50000)\n")

# What the grader's process disables before it runs any program: calling
# one of these is a TypeError there, so it is one here.
DISABLED = {
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
           "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod",
           "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


class HarnessFail(Exception):
    """The test fails before the program's code could decide it."""


def read_program(args):
    if len(args) >= 2 and args[0] == "-c":
        return args[1]
    if not args:
        raise HarnessFail("no program given")
    with open(args[0], "rb") as f:
        return f.read().decode("utf-8")


def lcb_process_state():
    """The grader's process as a program finds it: a larger int-to-str
    limit, stdin reopened on /dev/null (multiprocessing does that in its
    worker), and the functions its guard sets to None."""
    sys.set_int_max_str_digits(50000)
    try:
        sys.stdin = open(os.devnull)
    except OSError:
        sys.stdin = io.TextIOWrapper(io.BytesIO())
    import shutil
    import subprocess
    modules = {"os": os, "shutil": shutil, "subprocess": subprocess}
    os.environ["OMP_NUM_THREADS"] = "1"
    for mod, names in DISABLED.items():
        for name in names:
            setattr(modules[mod], name, None)
    builtins.quit = None
    builtins.help = None
    for name in BLOCKED_MODULES:
        sys.modules[name] = None


def without_main_guard(code):
    """A trailing `if __name__ == '__main__':` becomes its body (its else
    branch is dropped), as the grader rewrites stdio programs."""
    import ast  # here: only stdio programs under the lcb grader pay for it
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code


def as_function(code):
    """The prelude, the program's top-level imports, and everything else
    as the body of `def wrapped_function():`, called once per test: the
    program's globals become that function's locals. Unparsable code is
    left as it is (it then fails to compile)."""
    import ast
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fn = ast.FunctionDef(name="wrapped_function",
                             args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                kw_defaults=[], defaults=[]),
                             body=rest, decorator_list=[], lineno=-1)
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code


def load(code, module_name):
    """Run the code as a module; a `class Solution` anywhere in its text
    means the target is an instance of it, else the module itself."""
    mod = types.ModuleType(module_name, "")
    if module_name == "__main__":
        mod.__dict__["__builtins__"] = builtins
    exec(code, mod.__dict__)
    target = mod.Solution() if "class Solution" in code else mod
    if target is None:
        raise HarnessFail("no target")
    return target


class StdinBytes:
    """sys.stdin.buffer as the grader's stand-in has it: read() is all of
    the input, readline() always its first line."""

    def __init__(self, text):
        self.data = text.encode("utf-8")

    def read(self, *args):
        return self.data

    def readline(self, *args):
        return self.data.split(b"\n")[0] + b"\n"


class StdinText:
    """sys.stdin as the grader's stand-in has it: read() returns all of the
    input on every call, readlines() splits it on "\\n" (no line ends kept),
    readline() reads on; anything else is a StringIO's, and it cannot be
    iterated."""

    def __init__(self, text):
        self.text = text
        self.lines = io.StringIO(text)
        self.buffer = StdinBytes(text)

    def read(self, *args):
        return self.text

    def readline(self, *args):
        return self.lines.readline(*args)

    def readlines(self, *args):
        return self.text.split("\n")

    def __getattr__(self, name):
        return getattr(self.lines, name)


def lazy_mock_open(text):
    """builtins.open as the grader patches it, unittest.mock's mock_open
    over the input, made at its first call: importing unittest.mock costs
    more than most tests, and few programs call builtins.open itself (the
    prelude's `from builtins import *` binds the real open as a global)."""
    def first_call(*args, **kwargs):
        from unittest import mock
        builtins.open = mock.mock_open(read_data=text)
        return builtins.open(*args, **kwargs)
    return first_call


def run_lcb_stdio(source, text):
    """One stdio test as the grader runs it; the captured output."""
    code = as_function(without_main_guard(source))
    fn = getattr(load(code, "tmp_sol"), "wrapped_function", None)
    if fn is None:
        raise HarnessFail("the program defines no wrapped_function target (a `class Solution` "
                          "in a stdio program)")
    lines = iter(text.split("\n"))
    real = sys.stdin  # what a name bound at import time (from sys import stdin) still reads
    real.read = lambda *a: text
    real.readlines = lambda *a: text.split("\n")
    real.readline = lambda *a: next(lines)
    sys.stdin = StdinText(text)
    builtins.open = lazy_mock_open(text)
    captured = io.StringIO()
    captured.close = lambda x: 1
    sys.stdout = captured
    try:
        fn()
    except SystemExit:
        pass
    return captured.getvalue()


def call_args(text):
    try:
        return [json.loads(line) for line in text.split("\n")]
    except ValueError as e:
        raise HarnessFail("a test input line is not JSON: %s" % e)


def run_call(source, text, fn_name, lcb):
    """One call-based test; the return value (a tuple made a list)."""
    code = PRELUDE + "\n\n" + source if lcb else source
    target = load(code, "tmp_sol" if lcb else "__main__")
    if not hasattr(target, fn_name):
        raise HarnessFail("the program defines no %s" % fn_name)
    fn = getattr(target, fn_name)
    value = fn(*call_args(text))
    return list(value) if isinstance(value, tuple) else value


JSON_TYPES = (str, int, float, bool, type(None))


def json_typed(v, depth=0):
    """Whether json.dumps(v) stands for v under Python's ==: only JSON's
    own types (bool is an int), dict keys strings, no tuple below the top."""
    if depth > 10000:
        return False
    if type(v) in JSON_TYPES:
        return True
    if type(v) is list:
        return all(json_typed(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(type(k) is str and json_typed(x, depth + 1) for k, x in v.items())
    return False


def encode(value):
    sys.set_int_max_str_digits(0)
    if not json_typed(value):
        # Not JSON: the executor reads no value from it, so it equals
        # nothing (a set, a tuple inside a list, an object...).
        return "!%s\n" % type(value).__name__
    return json.dumps(value) + "\n"


def main(argv):
    if len(argv) < 4 or argv[1] not in ("lcb", "strict"):
        sys.stderr.write("usage: verify_harness.py lcb|strict FN_NAME PROGRAM.py|-c CODE\n")
        return 2
    grader, fn_name, prog = argv[1], argv[2], argv[3:]
    text = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    source = read_program(prog)
    sys.argv = list(prog)
    result = os.dup(1)
    os.dup2(2, 1)  # what the program writes to fd 1 itself is not its answer
    lcb = grader == "lcb"
    if lcb:
        lcb_process_state()
        sys.setrecursionlimit(50000)
    else:
        sys.stdin = io.TextIOWrapper(io.BytesIO())
    if fn_name:
        out = encode(run_call(source, text, fn_name, lcb))
    elif lcb:
        out = run_lcb_stdio(source, text)
    else:
        raise HarnessFail("a strict stdio test runs the program itself, not this harness")
    data = (MARK + out).encode("utf-8", "surrogateescape")
    while data:
        data = data[os.write(result, data):]
    return 0


if __name__ == "__main__":
    try:
        status = main(sys.argv)
    except BaseException as e:  # the program's failure, as the grader counts it
        sys.stdout = sys.__stderr__
        import traceback
        traceback.print_exception(e, file=sys.__stderr__)
        status = 1
    sys.__stderr__.flush()
    os._exit(status)
