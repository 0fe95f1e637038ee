"""The artifact suites' shared helpers (67-artifacts, 69-artifacts-warm):
digests computed here independently of sandguard, a result's check, and
the main that runs each case without the agent and with it."""
import hashlib
import os
import sys
import time

from sgagent import Agent
from sgtest import exit_code, report


def sha(path):
    """A file's SHA-256, or a directory's manifest digest computed here
    independently: "<sha256>  <relative path>\\n" per file, paths in byte
    order (docs/policy.md)."""
    if os.path.isdir(path):
        rels = sorted(os.path.relpath(os.path.join(d, n), path).encode()
                      for d, _, names in os.walk(path) for n in names)
        text = b"".join(b"%s  %s\n" % (sha(os.path.join(path.encode(), r)).encode(), r) for r in rels)
        return hashlib.sha256(text).hexdigest()
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def why_not(r, raw, cause, detail_has=()):
    """None when result r has `cause` and a detail with each of
    detail_has, else what differs."""
    if r is None:
        return "no result: %s" % (raw.stdout[-300:] + raw.stderr[-300:])
    if r["cause"] != cause:
        return "cause %s (%s), want %s" % (r["cause"], r["detail"], cause)
    for s in detail_has:
        if s not in (r["detail"] or ""):
            return "detail %r lacks %r" % (r["detail"], s)
    return None


def refusal_event(a, tag, has, attempt=0, seconds=10):
    """With the agent (tag "a"): None when its event stream has an
    artifact_refused line of the last batch, at `attempt`, whose detail
    names each of `has` (the agent's fold of the journal makes it), else
    why not. Without the agent there is no stream: None."""
    if tag != "a":
        return None
    deadline = time.monotonic() + seconds
    while True:
        got = a.events_matching(type="artifact_refused", batch_id=a.last_batch_id)
        for e in got:
            d = e.get("detail") or {}
            if e.get("action") == "denied" and d.get("attempt") == attempt and \
                    all(h in d.get("why", "") for h in has):
                return None
        if time.monotonic() > deadline:
            return "no artifact_refused event of batch %s at attempt %d naming %s: %s" % (
                a.last_batch_id, attempt, has, got[-2:])
        time.sleep(0.2)


def run_cases(cases, name, uid_base):
    """As root, each case (those named on the command line, else all) as
    case(agent, tag), once without the agent (tag "n") and once with it
    ("a"), each mode in its own Agent tree; a case's "SKIP why" is a SKIP."""
    if os.geteuid() != 0:
        for case, _ in cases:
            report("SKIP", case, "needs root")
        return 0
    only = sys.argv[1:]
    for with_agent in (False, True):
        mode = "agent" if with_agent else "no agent"
        a = Agent({}, name=name)
        a.env["SANDGUARD_UID_BASE"] = str(uid_base)
        try:
            if with_agent and not a.start():
                for case, _ in cases:
                    report("SKIP", "%s (%s)" % (case, mode), "the agent does not start: " + a.log_tail())
                continue
            for case, fn in cases:
                if only and case not in only:
                    continue
                try:
                    why = fn(a, "a" if with_agent else "n")
                except Exception as e:  # a crash in a case is that case's failure
                    why = "%s: %s" % (type(e).__name__, e)
                if why and why.startswith("SKIP "):
                    report("SKIP", "%s (%s)" % (case, mode), why[5:])
                else:
                    report("FAIL" if why else "PASS", "%s (%s)" % (case, mode), why or "")
        finally:
            a.cleanup()
    return exit_code()
