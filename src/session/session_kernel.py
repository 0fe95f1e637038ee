# sandguard's Python kernel for environment sessions (docs/environments.md).
# Each step is a fresh process in the session's sandbox: this script loads
# the session's globals from its scratch, runs the step's cell
# (.sandguard/cell) in them, prints the value of a last bare expression
# as an interactive interpreter does, and saves the globals back. A step
# killed at its deadline saves nothing: the next step sees the state of
# the last step that ended. What is kept: every global that pickles,
# modules (imported again by name), and functions defined in the session
# (their code, defaults and name; not their closures). Everything else
# (open files, threads, sockets, generators, classes defined in the
# session) is dropped and named in .sandguard/py-dropped.
import ast
import importlib
import marshal
import os
import pickle
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
STATE = os.path.join(HERE, "py-state.pickle")
CELL = os.path.join(HERE, "cell")
DROPPED = os.path.join(HERE, "py-dropped")

main = types.ModuleType("__main__")
G = main.__dict__
sys.modules["__main__"] = main


def _function(code, name, defaults, kwdefaults):
    f = types.FunctionType(marshal.loads(code), G, name, defaults)
    f.__kwdefaults__ = kwdefaults
    return f


# Pickle names _function by module and name: it must not be looked up in
# the session's __main__, which is the tenant's.
_helpers = types.ModuleType("_sandguard_kernel")
_helpers._function = _function
_function.__module__ = "_sandguard_kernel"
sys.modules["_sandguard_kernel"] = _helpers


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
            if obj.__closure__:
                raise pickle.PicklingError("a closure")
            return _function, (marshal.dumps(obj.__code__), obj.__name__,
                               obj.__defaults__, obj.__kwdefaults__)
        return NotImplemented


def _dumps(value):
    import io
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


def load():
    try:
        with open(STATE, "rb") as f:
            saved = pickle.load(f)
    except FileNotFoundError:
        return
    for name, blob in saved.items():
        try:
            G[name] = pickle.loads(blob)
        except Exception as e:  # a module gone, a name that no longer loads
            print("[kernel] %s could not be restored: %s" % (name, e), file=sys.stderr)


def save():
    kept, dropped = {}, []
    for name, value in list(G.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            kept[name] = _dumps(value)
        except Exception as e:
            dropped.append("%s: %s" % (name, type(e).__name__ if not str(e) else e))
    tmp = STATE + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(kept, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, STATE)
    with open(DROPPED, "w") as f:
        f.write("".join(d + "\n" for d in dropped))


def run(source):
    tree = ast.parse(source, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), G)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), G)
        if value is not None:
            print(repr(value))


def main_():
    G["__name__"] = "__main__"
    G["__builtins__"] = __builtins__
    load()
    with open(CELL, encoding="utf-8") as f:
        source = f.read()
    status = 0
    try:
        run(source)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        etype, value, tb = sys.exc_info()
        traceback.print_exception(etype, value, tb.tb_next)
        status = 1
    sys.stdout.flush()
    save()
    sys.exit(status)


main_()
