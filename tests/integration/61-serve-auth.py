#!/usr/bin/python3
"""`sandguard serve --tokens`: tenants bound to per-tenant secrets, with a
private agent enforcing (issue 12: "any HTTP client can exhaust the
agent's tenant table").

  - 5,000 invented tenant names, four ways (a header with no token, the
    /tenants/<name>/ path with no token, an invented token in the path, a
    real token with another tenant's name): every one is 401 or 403, and
    nothing changed: the agent's tenants (status) and its pinned tenant
    names, its ledger, the bookings, the sandbox cgroups and scratch;
  - the token is never in the server's log;
  - the tenant's token works in the path (verl's way: a URL and nothing
    else) and as "Authorization: Bearer";
  - without --tokens the server will not listen beyond loopback, and a
    tokens directory readable by every user stops it at start.

Prints one PASS/FAIL/SKIP line per case; details on stderr."""
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import exit_code, report  # noqa: E402
from sgagent import Agent  # noqa: E402
from sgserve import BIN, UID_BASE, Env, Server, can_run, run_cases, verl_request, verl_verdict  # noqa: E402
import sgjournal  # noqa: E402

INVENTED = 5000
THREADS = 8


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def token():
    return secrets.token_urlsafe(32)   # 43 characters of [A-Za-z0-9_-]


def pinned_names(dump):
    """The used entries of the agent's pinned tenant-name array (bpftool -j
    map dump): a name starts with a non-zero byte."""
    if not dump or dump.returncode != 0:
        return "n/a (bpftool)"
    used = []
    for e in json.loads(dump.stdout):
        value = e.get("value") or (e.get("formatted") or {}).get("value")
        if isinstance(value, list) and value and int(str(value[0]), 0) != 0:
            used.append(bytes(int(str(b), 0) for b in value).split(b"\0")[0].decode())
    return sorted(used)


def snapshot(agent, env):
    """Everything a request could have changed on the node."""
    st = agent.run(["status", "--json"])
    status = json.loads(st.stdout) if st.returncode == 0 else {}
    pin = os.path.join(agent.env["SANDGUARD_PIN_ROOT"], "sg_tenant_names")
    names = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", pin], capture_output=True, text=True) \
        if shutil.which("bpftool") else None
    ledger = os.path.join(agent.env["SANDGUARD_STATE_DIR"], "ledger.json")
    try:
        with open(ledger) as f:
            ledger_tenants = sorted(json.load(f).get("tenants", {}))
    except (OSError, ValueError):
        ledger_tenants = None
    cg = agent.env["SANDGUARD_CGROUP_ROOT"]
    return {
        "agent tenants": sorted(t["tenant"] for t in status.get("tenants", [])),
        "pinned tenant names": pinned_names(names),
        "ledger tenants": ledger_tenants,
        "bookings": len(sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])),
        "tenant cgroups": sorted(d for d in os.listdir(cg) if os.path.isdir(os.path.join(cg, d)))
        if os.path.isdir(cg) else [],
        "scratch": sorted(os.listdir(agent.scratch)),
    }


def flood(port, acme_token):
    """INVENTED requests from THREADS keep-alive clients; the statuses."""
    body = json.dumps(verl_request("print(1)", "")).encode()
    statuses = [None] * INVENTED

    def shape(i):
        name = "t%05d-%s" % (i, secrets.token_hex(3))
        kind = i % 4
        if kind == 0:
            return "/run_code", {"X-Sandguard-Tenant": name}, 401
        if kind == 1:
            return "/tenants/%s/run_code" % name, {}, 401
        if kind == 2:
            return "/t/%s/run_code" % token(), {"X-Sandguard-Tenant": name}, 401
        return "/run_code", {"X-Sandguard-Tenant": name, "Authorization": "Bearer " + acme_token}, 403

    def worker(k):
        c = None
        for i in range(k, INVENTED, THREADS):
            path, headers, want = shape(i)
            for _ in range(3):   # a kept-alive connection the server closed: reconnect
                try:
                    if c is None:
                        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    c.request("POST", path, body, dict(headers, **{"Content-Type": "application/json"}))
                    r = c.getresponse()
                    r.read()
                    statuses[i] = (r.status, want, r.getheader("WWW-Authenticate"))
                    break
                except (OSError, http.client.HTTPException):
                    c.close()
                    c = None
        if c:
            c.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return statuses


def t_invented_tenants(agent, env, srv, acme_token):
    # acme's run is in the agent's ledger once the agent saved it (every
    # second): wait for that, or the save would look like the flood's doing.
    for _ in range(300):
        before = snapshot(agent, env)
        if before["ledger tenants"] and "acme" in before["ledger tenants"]:
            break
        time.sleep(0.1)
    else:
        return "acme's run never reached the agent's ledger: %s" % before
    t0 = time.monotonic()
    statuses = flood(srv.port, acme_token)
    took = time.monotonic() - t0
    wrong = [(i, s) for i, s in enumerate(statuses) if s is None or s[0] != s[1]]
    if wrong:
        return "%d of %d answered otherwise, e.g. %s" % (len(wrong), INVENTED, wrong[:5])
    if any(s[0] == 401 and s[2] != 'Bearer realm="sandguard"' for s in statuses):
        return "a 401 without the Bearer challenge"
    time.sleep(1.5)   # the agent's ledger is saved every second: let a change show
    after = snapshot(agent, env)
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    if changed:
        return "the flood changed %s" % changed
    status, health = srv.get("/healthz")
    if health.get("unauthorized", 0) < INVENTED:
        return "/healthz counts %s unauthorized" % health.get("unauthorized")
    t_invented_tenants.summary = "%d requests in %.1f s: %d x 401, %d x 403; unchanged: %s" % (
        INVENTED, took, sum(s[0] == 401 for s in statuses), sum(s[0] == 403 for s in statuses),
        "; ".join("%s %s" % (k, v) for k, v in before.items()))
    note(t_invented_tenants.summary)


def t_token_works(agent, env, srv, acme_token):
    st, _, resp = srv.post("/t/%s/run_code" % acme_token, verl_request("print(6 * 7)", ""))
    if st != 200 or verl_verdict(resp, "42") is not True or resp["sandguard"]["tenant"] != "acme":
        return "token in the path: HTTP %d %s" % (st, resp)
    st, _, resp = srv.post("/run_code", verl_request("print(6 * 7)", ""),
                           {"Authorization": "Bearer " + acme_token, "X-Sandguard-Tenant": "acme"})
    if st != 200 or resp["sandguard"]["tenant"] != "acme":
        return "Bearer: HTTP %d %s" % (st, resp)
    st, _, resp = srv.post("/t/%s/v1/verify" % acme_token, {"code": "print(input())", "language": "python",
                                                          "tests": [{"input": "1", "output": "1"}]})
    if st != 200 or resp["reward"] != 1 or resp["tenant"] != "acme":
        return "/t/<token>/v1/verify: HTTP %d %s" % (st, resp)


def t_token_never_logged(agent, env, srv, acme_token):
    log = srv.log_tail(10 ** 9)
    if acme_token in log:
        return "the token is in the server's log"
    if "/t/.../run_code" not in log:
        return "the access log does not show the redacted path"


def t_no_tokens_loopback_only(agent, env, srv, acme_token):
    p = subprocess.run([BIN, "serve", "--listen", "0.0.0.0:0", "--policy-dir", agent.policy_dir],
                       capture_output=True, text=True, timeout=30, env=env.env)
    if p.returncode != 64 or "--tokens" not in p.stderr or "listening" in p.stdout:
        return "0.0.0.0 without tokens: exit %d %s" % (p.returncode, p.stderr[-300:])
    bad = os.path.join(env.dir, "open-tokens")
    os.makedirs(bad)
    with open(os.path.join(bad, "acme"), "w") as f:
        f.write(token() + "\n")
    os.chmod(os.path.join(bad, "acme"), 0o644)
    p = subprocess.run([BIN, "serve", "--listen", "0.0.0.0:0", "--tokens", bad, "--policy-dir",
                        agent.policy_dir], capture_output=True, text=True, timeout=30, env=env.env)
    if p.returncode != 64 or "readable or writable by every user" not in p.stderr:
        return "a world-readable token file: exit %d %s" % (p.returncode, p.stderr[-300:])


def main():
    if not can_run("serve tokens"):
        return 0
    agent = Agent({"acme": {}}, name="serve-auth")
    env = Env()
    srv = None
    acme_token = token()
    tokens = os.path.join(env.dir, "tokens")
    os.makedirs(tokens)
    with open(os.path.join(tokens, "acme"), "w") as f:
        f.write("# acme's trainer\n%s\n" % acme_token)
    os.chmod(os.path.join(tokens, "acme"), 0o600)
    try:
        if not agent.start():
            report("SKIP", "serve tokens", "the agent did not start: %s" % agent.log_tail())
            return exit_code()
        srv = Server(env, "--tokens", tokens, "--policy-dir", agent.policy_dir,
                     env_override=dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE)))
        # The token first: acme then exists in the agent's tables and ledger,
        # which the flood must leave exactly as they are.
        cases = [("the token works in the path and as Bearer", t_token_works),
                 ("5,000 invented tenants: 401/403, nothing changed", t_invented_tenants),
                 ("the token is never logged", t_token_never_logged),
                 ("no tokens: loopback only; unsafe token files refused", t_no_tokens_loopback_only)]
        run_cases(cases, (agent, env, srv, acme_token), srv.log_tail)
    finally:
        if srv:
            srv.stop()
        env.cleanup()
        agent.cleanup()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
