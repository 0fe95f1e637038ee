#!/usr/bin/python3
"""What SandboxFusion's own runner tests ask of /run_code, in our words,
through a real `sandguard serve --languages all` under the shipped
policies/examples/code-rl.json (only its scratch root changed), with a
private agent enforcing:

  every-language-under-code-rl      each language's program reads stdin and
                                    answers, the agent kills nothing
  runtime-libraries                 python's requests (from sandguard's
                                    python3-runtime directory, which the
                                    program cannot write; in /v1/verify's
                                    python too), java's javatuples, node's
                                    lodash (scripts/install-deps.sh); a
                                    tenant whose exec.allow lacks env runs
                                    python without requests
  fetch-absolute-and-relative       files the program wrote in its working
                                    directory, /mnt and /tmp come back under
                                    the names asked; a missing one is named
  fetch-outside-refused             '..', the host's files, a bare '/' are
                                    400s, and nothing runs
  loopback-server-and-client        a server and its client in one program,
                                    by 127.0.0.1 and by "localhost"; the host
                                    cannot reach the server meanwhile
  listen-refused-without-allow      the same program under the policy with
                                    allow_listen off fails, as the program's

A missing toolchain is a SKIP naming it. The full SandboxFusion suite,
run against serve with only its client swapped, is described in
docs/trainer-integration.md.

Prints one PASS/FAIL/SKIP line per case; details on stderr."""
import base64
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import exit_code, free_port, report  # noqa: E402
from sgagent import Agent  # noqa: E402
from sgserve import SRC, UID_BASE, Env, Server, can_run, run_cases  # noqa: E402
import sgjournal  # noqa: E402
import sglangs  # noqa: E402

TENANT, CLOSED, NO_ENV = "sfusion", "sfusion-closed", "sfusion-no-env"
JAR = "/usr/share/java/javatuples.jar"
LODASH = "/usr/share/nodejs/lodash"
PY_RUNTIME = "/usr/lib/sandguard/python3-runtime"
ENV = "/usr/bin/env"

# Where requests comes from, and whether the program can change it.
REQUESTS = """
import os, requests
print(os.path.dirname(os.path.dirname(requests.__file__)))
try:
    open(os.path.join(%r, "planted.py"), "w").close()
    print("writable")
except OSError:
    print("read-only")
""" % PY_RUNTIME

# A TCP server on a thread, its client in the main thread; the program then
# lingers so that the host can try to reach the server meanwhile.
LOOPBACK = """
import socket, threading, time
port = %d
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("", port))
srv.listen(4)
def serve():
    while True:
        c, _ = srv.accept()
        c.sendall(b"pong " + c.recv(16))
        c.close()
threading.Thread(target=serve, daemon=True).start()
for host in ("127.0.0.1", "localhost"):
    with socket.create_connection((host, port), timeout=5) as c:
        c.sendall(host.encode()[:16])
        print(c.recv(64).decode())
time.sleep(2)
"""


def post(srv, tenant, body):
    return srv.post("/tenants/%s/run_code" % tenant, body, timeout=120)


def body(language, code, stdin="", **extra):
    b = {"language": language, "code": code, "stdin": stdin, "run_timeout": 20, "compile_timeout": 30}
    b.update(extra)
    return b


def ran_ok(status, resp, want_stdout=None):
    """None, or why the reply is not a clean success."""
    if status != 200:
        return "HTTP %d %s" % (status, resp)
    run = resp.get("run_result") or {}
    if resp.get("status") != "Success" or resp["sandguard"]["rule"] is not None:
        return "status %s rule %s: %s" % (resp.get("status"), resp["sandguard"]["rule"],
                                          json.dumps(resp)[:1200])
    if want_stdout is not None and run.get("stdout") != want_stdout:
        return "stdout %r, want %r" % (run.get("stdout"), want_stdout)
    return None


def every_language(env, srv):
    bad = []
    for lang in sglangs.LANGUAGES:
        status, _, resp = post(srv, TENANT, body(lang, sglangs.CORRECT[lang], "40 2"))
        why = ran_ok(status, resp, "42\n")
        if why:
            bad.append("%s: %s" % (lang, why))
    return "; ".join(bad) or None


def python_runtime(srv):
    """None, or why requests is not where and as it should be."""
    status, _, resp = post(srv, TENANT, body("python", REQUESTS))
    why = ran_ok(status, resp, PY_RUNTIME + "\nread-only\n")
    if why:
        return "python: " + why
    tests = [{"input": "", "output": "2.28.1\n"}]
    status, _, res = srv.post("/v1/verify", {"tenant": TENANT, "language": "python", "tests": tests,
                                             "code": "import requests\nprint(requests.__version__)"})
    if status != 200 or res.get("reward") != 1:
        return "/v1/verify: HTTP %d %s" % (status, json.dumps(res)[:1200])
    status, _, resp = post(srv, NO_ENV, body("python", "import requests\n"))
    run = (resp or {}).get("run_result") or {}
    if status != 200 or "No module named 'requests'" not in (run.get("stderr") or ""):
        return "a tenant without env: HTTP %d %s" % (status, json.dumps(resp)[:1200])
    status, _, resp = post(srv, NO_ENV, body("python", "print(6 * 7)\n"))
    return ran_ok(status, resp, "42\n")


def runtime_libraries(env, srv):
    missing = [p for p in (JAR, LODASH, PY_RUNTIME) if not os.path.exists(p)]
    if missing:
        return ("SKIP", "%s not installed (scripts/install-deps.sh)" % ", ".join(missing))
    why = python_runtime(srv)
    if why:
        return why
    cases = [
        ("java", "import org.javatuples.Triplet;\n\npublic class Main {\n"
                 "    public static void main(String[] a) {\n"
                 "        Triplet<String, Integer, Boolean> t = Triplet.with(\"x\", 7, true);\n"
                 "        System.out.println(t.getValue1() * 6);\n    }\n}\n", "42\n"),
        ("nodejs", "const _ = require('lodash');\nconsole.log(_.sum(_.range(1, 5)));\n", "10\n"),
    ]
    bad = []
    for lang, code, want in cases:
        status, _, resp = post(srv, TENANT, body(lang, code))
        why = ran_ok(status, resp, want)
        if why:
            bad.append("%s: %s" % (lang, why))
    return "; ".join(bad) or None


def fetch_files(env, srv):
    code = ("import os\nopen('out.txt', 'w').write('here')\nos.makedirs('/mnt/res')\n"
            "open('/mnt/res/b', 'w').write('in mnt')\nopen('/tmp/t', 'w').write('in tmp')\n")
    names = ["out.txt", "/mnt/res/b", "/tmp/t", "/mnt/missing"]
    status, _, resp = post(srv, TENANT, body("python", code, fetch_files=names))
    why = ran_ok(status, resp)
    if why:
        return why
    got = {k: base64.b64decode(v).decode() for k, v in resp["files"].items()}
    want = {"out.txt": "here", "/mnt/res/b": "in mnt", "/tmp/t": "in tmp"}
    if got != want:
        return "files %r, want %r" % (got, want)
    if list(resp["sandguard"].get("fetch_errors", {})) != ["/mnt/missing"]:
        return "fetch_errors %r" % resp["sandguard"].get("fetch_errors")
    return None


def fetch_outside(agent, srv):
    bad = []
    for path in ("/mnt/../etc/passwd", "/etc/hostname", "../x", "/", "/mnt", "/proc/self/environ"):
        rid = "sf-outside-%d" % time.monotonic_ns()
        status, _, resp = srv.post("/tenants/%s/run_code" % TENANT,
                                   body("python", "open('/mnt/x', 'w').write('x')", fetch_files=[path]),
                                   {"X-Sandguard-Request-Id": rid})
        if status != 400 or "fetch_files[0]" not in resp.get("error", ""):
            bad.append("%s: HTTP %d %s" % (path, status, resp))
        if any(o["batch_id"] == rid for o in sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])):
            bad.append("%s: a refused request was booked" % path)
    return "; ".join(bad) or None


def loopback(env, srv):
    port = free_port()
    reached, result = [], {}

    def run():
        result["reply"] = post(srv, TENANT, body("python", LOOPBACK % port))
    t = threading.Thread(target=run)
    t.start()
    while t.is_alive():
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect(("127.0.0.1", port))
            reached.append(s.recv(64))
        except OSError:
            pass
        finally:
            s.close()
        time.sleep(0.05)
    t.join()
    status, _, resp = result["reply"]
    why = ran_ok(status, resp, "pong 127.0.0.1\npong localhost\n")
    if why:
        return why
    if reached:
        return "the host reached the sandbox's server: %r" % reached
    return None


def listen_refused(env, srv):
    status, _, resp = post(srv, CLOSED, body("python", LOOPBACK % free_port()))
    run = (resp or {}).get("run_result") or {}
    if status != 200 or resp.get("status") != "Failed" or run.get("status") != "Finished" \
            or "PermissionError" not in (run.get("stderr") or ""):
        return "HTTP %d %s" % (status, json.dumps(resp)[:1200])
    return None


CASES = [
    ("every-language-under-code-rl", every_language),
    ("runtime-libraries", runtime_libraries),
    ("fetch-absolute-and-relative", fetch_files),
    ("fetch-outside-refused", fetch_outside),
    ("loopback-server-and-client", loopback),
    ("listen-refused-without-allow", listen_refused),
]


def write_policies(agent):
    with open(os.path.join(SRC, "policies", "examples", "code-rl.json")) as f:
        p = json.load(f)
    p["files"]["scratch_root"] = agent.scratch
    for tenant, listen in ((TENANT, True), (CLOSED, False), (NO_ENV, False)):
        p["egress"]["allow_listen"] = listen
        if tenant == NO_ENV:
            p["exec"]["allow"] = [x for x in p["exec"]["allow"] if x != ENV]
        with open(os.path.join(agent.policy_dir, tenant + ".json"), "w") as f:
            json.dump(p, f)


def serve_and_run(agent, env):
    write_policies(agent)
    if not agent.start():
        report("SKIP", "serve sandboxfusion", "the agent did not start: %s" % agent.log_tail())
        return
    srv = Server(env, "--languages", "all", "--policy-dir", agent.policy_dir,
                 env_override=dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE)))
    try:
        run_cases(CASES, (agent, srv), srv.log_tail)
    finally:
        srv.stop()


def main():
    if not can_run("serve sandboxfusion"):
        return 0
    missing = [sglangs.missing(lang) for lang in sglangs.LANGUAGES if sglangs.missing(lang)]
    if missing:
        report("SKIP", "serve sandboxfusion", "; ".join(missing))
        return 0
    agent, env = Agent({}, name="sfusion"), Env()
    try:
        serve_and_run(agent, env)
    finally:
        env.cleanup()
        agent.cleanup()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
