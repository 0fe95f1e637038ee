#!/usr/bin/env python3
"""A fleet's tenants (issue 32, item 3): 10,000 tenants with policy files.

  - the agent compiles every one into a policy slot of its own at start
    (status: 10,001 slots with the default's, every policy loaded), with
    one summary line in its log, not one per tenant;
  - a sandbox of tenants #1, #5000 and #9999 is judged by its own policy:
    each allows egress to one TCP port of its own, so a connect to its own
    port runs on (ok) and one to another tenant's port is killed
    (tenant_policy_violation/egress);
  - each is booked under its own name in `sandguard top --json` and in
    /metrics;
  - 2,000 invented tenant names (no policy file: the default policy) are
    booked: the first LEDGER_MAX_INVENTED (1,024) get rows, the rest go to
    `_overflow`; a tenant whose policy file is added after that flood is
    still compiled, enforced and booked under its own name;
  - a SIGHUP reload of 10,000 unchanged files logs no per-tenant line;
  - pins left by an agent built with the old table (1,024 slots) stop the
    new agent at start with an error that names the map and what to do.

Prints the start-up and reload times and the agent's RSS (for
docs/performance.md)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish, skip  # noqa: E402
from sgtest import free_port  # noqa: E402
import sgjournal  # noqa: E402

N = int(os.environ.get("SG_MANY_TENANTS", "10000"))
INVENTED = 2000
INVENTED_ROWS = 1024  # LEDGER_MAX_INVENTED
BASE_PORT = 20000

CONNECT = """import json, socket, sys
b = json.load(sys.stdin)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
except OSError:
    pass  # refused or reset by the relay: allowed, nothing listens
print(json.dumps([1.0] * len(b["items"])))
"""


def name(i):
    return "t%05d" % i


def policy_text(a, tenant, port):
    return json.dumps({
        "tenant": tenant,
        "limits": {"timeout_ms": 3000, "memory_mb": 256, "max_tasks": 32},
        "files": {"scratch_root": a.scratch,
                  "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                "/etc/localtime", "/dev/null", "/dev/urandom", a.programs]},
        "exec": {"allow": ["/usr/bin/python3*"]},
        "egress": {"allow": [{"cidr": "127.0.0.1/32", "port": port, "proto": "tcp"}]},
        "actions": {"egress": "kill", "file": "kill", "fork": "kill", "exec": "kill"},
        "failure": {"mode": "skip"},
    })


def write_policy(a, tenant, port):
    with open(os.path.join(a.policy_dir, tenant + ".json"), "w") as f:
        f.write(policy_text(a, tenant, port))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def log_text(a):
    a.log.flush()
    with open(os.path.join(a.dir, "agent.log")) as f:
        return f.read()


def wait_log(a, pattern, after, timeout=120):
    """Seconds until `pattern` appears in the agent's log past offset `after`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if re.search(pattern, log_text(a)[after:]):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def ledger(a):
    return {t["tenant"]: t for t in sgjournal.top(a).get("tenants", [])}


def status_tenants(a):
    return {t["tenant"]: t for t in sgjournal.status(a).get("tenants", [])}


def enforced(a, i, port_of, other_port):
    """Tenant i's own port is allowed, another tenant's is not: judged by
    its own policy, booked under its own name."""
    t = name(i) if isinstance(i, int) else i
    prog = a.program("connect.py", CONNECT)
    ok, r1 = a.exec_batch(t, prog, items=2, args=[str(port_of)])
    bad, r2 = a.exec_batch(t, prog, items=2, args=[str(other_port)])
    check(ok is not None and ok.get("cause") == "ok",
          "tenant %s: egress to its own port %d is allowed" % (t, port_of),
          (r1.stdout + r1.stderr)[-400:])
    check(bad is not None and bad.get("cause") == "tenant_policy_violation" and
          bad.get("rule") == "egress",
          "tenant %s: egress to port %d (not in its policy) is killed" % (t, other_port),
          (r2.stdout + r2.stderr)[-400:])


def flood_invented(a):
    """INVENTED outcomes of invented tenants appended to the journal the way
    executors book them (one record each), cloned from a real record."""
    state = a.env["SANDGUARD_STATE_DIR"]
    recs = sgjournal.read(state)
    seg = sgjournal.segments(state)[-1]
    lines = []
    for k in range(INVENTED):
        rec = dict(recs[-1])
        rec.update({"id": "inv-flood-%d" % k, "tenant": "inv%04d" % k,
                    "batch_id": "inv-b-%d" % k, "cause": "ok", "class": "none",
                    "rule": None, "final": True})
        lines.append(json.dumps(rec, separators=(",", ":")))
    with open(seg, "a") as f:
        f.write("\n".join(lines) + "\n")


def metrics_text(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        return r.read().decode()


def old_pins():
    """sg_policies pinned with 1,024 entries (an older agent's): a clear
    refusal, not a silent failure."""
    a = Agent({"x1": {}}, name="oldpin")
    root = a.env["SANDGUARD_PIN_ROOT"]
    try:
        os.makedirs(root, exist_ok=True)
        r = subprocess.run(["bpftool", "map", "create", root + "/sg_policies", "type", "hash",
                            "key", "4", "value", "676", "entries", "1024", "name", "sg_policies",
                            "flags", "1"], capture_output=True, text=True)
        if r.returncode != 0:
            skip("old pins refused", "bpftool map create: " + r.stderr.strip()[-200:])
            return
        started = a.start("--mode", "fallback", timeout=20)
        text = a.log_tail(2000)
        check(not started and a.proc.poll() not in (None, 0) and
              "sg_policies was made by another sandguard version (1024 entries" in text and
              "agent --cleanup" in text,
              "pins of an agent with 1,024 slots: the agent refuses to start, saying why",
              text[-400:])
    finally:
        a.cleanup()


def main():
    if os.geteuid() != 0:
        skip("many-tenants", "needs root")
        return
    old_pins()
    a = Agent({}, name="many")
    try:
        t0 = time.monotonic()
        for i in range(N):
            write_policy(a, name(i), BASE_PORT + i)
        print("# wrote %d policy files in %.1f s" % (N, time.monotonic() - t0))
        mport = free_port()
        t0 = time.monotonic()
        started = a.start("--mode", "fallback", "--metrics", "127.0.0.1:%d" % mport, timeout=150)
        startup = time.monotonic() - t0
        check(started, "agent starts with %d policy files" % N, a.log_tail())
        if not started:
            return
        rss_start = rss_kib(a.proc.pid)
        text = log_text(a)
        m = re.search(r"(\d+) policy slots, \d+ sandboxes enforced under .* \((\d+) ms\)", text)
        check(m is not None and int(m.group(1)) == N + 1,
              "all %d policies have a slot (and the default)" % N, m.group(0) if m else text[-300:])
        st = status_tenants(a)
        loaded = [t for t, v in st.items() if v.get("policy_ok")]
        check(len(loaded) == N + 1, "status: %d policies loaded" % (N + 1), "%d" % len(loaded))
        check(text.count("cannot be enforced") == 0 and text.count("live sandboxes") == 0,
              "no per-tenant slot complaints in the log",
              "%d lines" % text.count("live sandboxes"))

        # A reload of 10,000 unchanged files: timed, and no flood.
        off = len(log_text(a))
        a.proc.send_signal(signal.SIGHUP)
        reload_s = wait_log(a, r"policies reloaded \(generation", off)
        check(reload_s is not None, "SIGHUP reload of %d policies completes" % N)
        added = log_text(a)[off:].count("\n")
        check(added <= 5, "a reload logs a summary, not one line per tenant",
              "%d lines" % added)

        for i in (1, 5000, N - 1):
            enforced(a, i, BASE_PORT + i, BASE_PORT + (i + 1) % N)

        flood_invented(a)
        late = "late-customer"
        write_policy(a, late, BASE_PORT + N + 7)
        dl = time.time() + 60
        while time.time() < dl and not status_tenants(a).get(late, {}).get("policy_ok"):
            time.sleep(0.2)
        check(status_tenants(a).get(late, {}).get("policy_ok"),
              "a policy file added after the flood is compiled")
        enforced(a, late, BASE_PORT + N + 7, BASE_PORT + 3)

        top = sgjournal.settled(a)
        rows = {t["tenant"]: t for t in top.get("tenants", [])}
        for t in (name(1), name(5000), name(N - 1), late):
            r = rows.get(t, {})
            check(r.get("attempts") == 2 and r.get("batches_ok") == 1 and
                  r.get("batches_failed") == 1,
                  "top --json books %s under its own name" % t, json.dumps(r)[:300])
        inv_rows = [t for t in rows if t.startswith("inv")]
        ovf = rows.get("_overflow", {})
        check(len(inv_rows) == INVENTED_ROWS,
              "the first %d invented names get rows" % INVENTED_ROWS, "%d" % len(inv_rows))
        check(ovf.get("attempts") == INVENTED - INVENTED_ROWS,
              "only the %d invented names past the cap go to _overflow" %
              (INVENTED - INVENTED_ROWS), json.dumps(ovf)[:200])

        body = metrics_text(mport)
        for t in (name(1), name(5000), name(N - 1), late):
            check('sandguard_batches_total{tenant="%s",status="ok"} 1' % t in body,
                  "/metrics has %s's batches" % t)
        # The gauge is refreshed by the agent's one-second tick.
        dl = time.time() + 10
        while True:
            mt = set(re.findall(r'sandguard_active_sandboxes\{tenant="([^"]+)"\}', body))
            if len(mt) >= N + 2 or time.time() > dl:
                break
            time.sleep(1)
            body = metrics_text(mport)
        check(len(mt) >= N + 2, "/metrics: every tenant with a policy has its series",
              "%d tenants; %d bytes, ends %r" % (len(mt), len(body), body[-200:]))
        rss_end = rss_kib(a.proc.pid)
        print("# startup %.2f s, reload %.2f s, RSS %d KiB after start, %d KiB after "
              "bookings and a scrape" % (startup, reload_s or -1, rss_start, rss_end))
    finally:
        a.cleanup()


if __name__ == "__main__":
    main()
    finish()
