#!/usr/bin/python3
"""Every /run_code language, five cases each, through a real `sandguard
serve` with a private agent enforcing, under exactly the policy snippets
of docs/trainer-integration.md (merged into policies/default.json):

  correct program   Success, run_result Finished 0, the right stdout, verl True
  compile error     compiled languages: compile_result Finished non-zero,
                    run_result null (verl -4); interpreted ones: the run
                    exits non-zero (verl -2), as SandboxFusion
  runtime error     Failed, run_result Finished non-zero (verl -2)
  timeout           Failed, run_result TimeLimitExceeded (verl -3)
  memory hog        Failed within the documented memory_mb: the sandbox's
                    cap (Error, tenant_oom) or the runtime's own
                    out-of-memory exit (Finished non-zero): verl -2

Every case is booked once, final, under its request id, with the cause the
response names; no correct program is killed by the agent (its policy
lets it exec and read what it needs), and no scratch is left behind. A
language whose toolchain is missing is a SKIP naming it.

Prints one PASS/FAIL/SKIP line per language; details on stderr."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgserve import used_scratch_left, verl_request, verl_verdict  # noqa: E402
import sgjournal  # noqa: E402
import sglangs  # noqa: E402


HOG_DEADLINE_S = 40


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def request(language, code, stdin="", run_timeout=10, compile_timeout=None):
    body = verl_request(code, stdin, run_timeout=run_timeout, language=language)
    if compile_timeout:
        body["compile_timeout"] = compile_timeout
    return body


def booked(state_dir, request_id):
    return [o for o in sgjournal.read(state_dir)
            if o["batch_id"] in (request_id, request_id + ".compile") and o["final"]]


def one_language(language, srv, agent, scratch):
    """None, or why the language failed."""
    tenant = "lang-" + language
    memory_mb = agent_policy(agent, tenant)["limits"]["memory_mb"]
    compiled = language in sglangs.COMPILED
    cases = [
        ("correct", request(language, sglangs.CORRECT[language], "40 2"), "ok", True),
        ("compile error", request(language, sglangs.BROKEN[language]), None, -4 if compiled else -2),
        ("runtime error", request(language, sglangs.CRASH[language]), "tenant_crash", -2),
        # The run's deadline only: compiling may take longer on a busy node.
        ("timeout", request(language, sglangs.LOOP[language], run_timeout=2, compile_timeout=20),
         "tenant_timeout", -3),
        # Filling 512 MB takes seconds on a busy VM: a deadline well past it.
        ("memory hog", request(language, sglangs.HOG[language], run_timeout=HOG_DEADLINE_S, compile_timeout=20),
         ("tenant_oom", "tenant_crash"), -2),
    ]
    timings = []
    for name, body, cause, verdict in cases:
        rid = "lang-%s-%s-%d" % (language, name.replace(" ", "-"), time.monotonic_ns())
        t0 = time.monotonic()
        status, _, resp = srv.post("/tenants/%s/run_code" % tenant, body,
                                   {"X-Sandguard-Request-Id": rid}, timeout=120)
        timings.append("%s %.1fs" % (name, time.monotonic() - t0))
        if status != 200:
            return "%s: HTTP %d %s" % (name, status, resp)
        got = verl_verdict(resp, "42")
        run, comp, sg = resp.get("run_result"), resp.get("compile_result"), resp["sandguard"]
        if got != verdict:
            return "%s: verl would score %r, want %r: %s" % (name, got, verdict, json.dumps(resp)[:1500])
        if compiled and comp is None and name != "compile error":
            return "%s: no compile_result: %s" % (name, resp)
        if not compiled and comp is not None:
            return "%s: compile_result %s for an interpreted language" % (name, comp)
        if name == "compile error" and compiled and (run is not None or comp["status"] != "Finished"
                                                     or comp["return_code"] in (0, None)):
            return "compile error: %s" % resp
        if name == "compile error" and not compiled and (run["status"] != "Finished" or run["return_code"] == 0):
            return "syntax error: %s" % resp
        want = cause if isinstance(cause, tuple) else (cause,)
        if cause and sg["cause"] not in want:
            return "%s: cause %s, want %s: %s" % (name, sg["cause"], cause, json.dumps(resp)[:1500])
        if name == "timeout" and run["status"] != "TimeLimitExceeded":
            return "timeout: %s" % run
        if name == "memory hog" and (sg["memory_mb"] != memory_mb or run["status"] not in ("Error", "Finished")):
            return "memory hog: memory_mb %s (want %s), %s" % (sg["memory_mb"], memory_mb, run)
        if sg["rule"] is not None:
            return "%s: the agent killed it (rule %s): %s" % (name, sg["rule"], json.dumps(resp)[:1500])
        # Booked once, final, with the cause answered; the ids join up.
        lines = booked(agent.env["SANDGUARD_STATE_DIR"], rid)
        last = [o for o in lines if o["batch_id"] == rid] or [o for o in lines if o["batch_id"] == rid + ".compile"]
        if len(last) != 1 or last[0]["cause"] != sg["cause"]:
            return "%s: bookings %s (answered %s)" % (name, lines, sg["cause"])
        if not sg["sandbox_ids"] or set(sg["batch_ids"]) != {o["batch_id"] for o in lines}:
            return "%s: ids %s / %s vs bookings %s" % (name, sg["sandbox_ids"], sg["batch_ids"], lines)
    note("%s: %s" % (language, ", ".join(timings)))
    left = [d for d in used_scratch_left(scratch, agent.env["SANDGUARD_STATE_DIR"]) if d.startswith(tenant + "/")]
    if left:
        return "scratch left: %s" % left
    return None


def agent_policy(agent, tenant):
    with open(os.path.join(agent.policy_dir, tenant + ".json")) as f:
        return json.load(f)


def main():
    # The memory hog's deadline is the policy's too.
    return sglangs.serve_each("language", "lang-", lambda lang, srv, agent: one_language(lang, srv, agent, agent.scratch),
                              "correct, compile error, runtime error, timeout, memory hog under the "
                              "documented policy, agent enforcing", extra_limits={"timeout_ms": HOG_DEADLINE_S * 1000})


if __name__ == "__main__":
    sys.exit(main())
