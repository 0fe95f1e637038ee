#!/usr/bin/env python3
"""`sandguard serve` as OpenRLHF's remote reward server and as rLLM's code
tool, with a private agent enforcing and per-tenant tokens.

- OpenRLHF (--reward.remote_url, openrlhf/utils/agent.py
  _fetch_rewards_via_http): its exact body {"query", "prompts", "labels"}
  posted as aiohttp does (json=, no header of its own, the token in the
  URL), read as OpenRLHF reads it ("scores", else "rewards"; "extra_logs").
  Each tenant's token reaches its own reward program (its policy's
  reward.command), which gets the labels; the scores are right and booked
  to that tenant under the request id; a program that breaks its policy is
  booked tenant_policy_violation with the rule, and its samples get no
  reward; bad shapes and credentials are 4xx, never booked.
- rLLM: Together's /tci/execute body {"code", "language": "python"} with
  the token as the SDK's API key, read as rLLM's TogetherCodeTool reads it
  (an "error" output means a wrong program), at the paths the SDK posts
  to; then the shipped clients/python/sandguard/rllm.py SandguardCodeTool:
  right, wrong, timeout and violation verdicts, booked to the tenant, and
  a platform fault raised rather than scored."""
import os
import secrets
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent  # noqa: E402
from sgserve import SRC, UID_BASE, Env, Server, can_run, run_cases  # noqa: E402
from sgtest import exit_code, report  # noqa: E402
import sgjournal  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from sandguard.rllm import SandguardCodeTool, SandguardUnavailable  # noqa: E402

# A reward program: the batch on stdin (items with prompt, completion,
# query, label), one score per item on stdout. Its label is the answer
# (or {"answer": ...}); "__egress__" makes it reach for the network.
REWARD = r'''
import json, socket, sys
batch = json.load(sys.stdin)
scores = []
for item in batch["items"]:
    label = item["label"]
    if label == "__egress__":
        s = socket.socket(); s.settimeout(2); s.connect(("192.0.2.1", 80))
    if isinstance(label, dict):
        label = label["answer"]
    assert item["query"] == item["prompt"] + item["completion"] or item["completion"] == item["query"]
    scores.append(1.0 if item["completion"].strip() == str(label) else 0.0)
print(json.dumps(scores))
'''
HALF = 'import json, sys\nprint(json.dumps([0.5] * len(json.load(sys.stdin)["items"])))\n'

# What rLLM's codetool_check_correctness sends: the program and its tests
# in one script that exits 1 at the first failing test (written here, not
# rLLM's text: the same contract).
def tests_script(program, tests):
    return ("import io, sys\nPROGRAM = %r\nfor inp, want in %r:\n"
            "    sys.stdin = io.StringIO(inp); out = io.StringIO(); real = sys.stdout; sys.stdout = out\n"
            "    try:\n        exec(PROGRAM, {'__name__': '__main__'})\n    finally:\n        sys.stdout = real\n"
            "    if out.getvalue().strip() != want.strip():\n"
            "        print('Test failed. Exiting.'); sys.exit(1)\n"
            "print('All tests passed successfully!')\n") % (program, tests)


SUM = "a, b = map(int, input().split())\nprint(a + b)"
EGRESS = "import socket\ns = socket.socket(); s.settimeout(2); s.connect(('192.0.2.1', 80))"


class World:
    def __init__(self, agent, env, srv, tokens):
        self.agent, self.env, self.srv, self.tokens = agent, env, srv, tokens

    def outcomes(self, request_id):
        return [o for o in sgjournal.read(self.agent.env["SANDGUARD_STATE_DIR"])
                if o["batch_id"] == request_id and o["final"]]


# ---- OpenRLHF ---------------------------------------------------------------

def openrlhf_post(w, tenant, queries, prompts, labels, token=None):
    """What _fetch_rewards_via_http posts: aiohttp's json=, to the URL."""
    path = "/t/%s/openrlhf/get_reward" % (token or w.tokens[tenant])
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    status, r, body = w.srv.post(path, payload, {"Accept": "*/*"})
    return status, r.getheader("X-Sandguard-Request-Id"), body


def openrlhf_reads(body):
    """How SingleTurnAgentExecutor.execute reads one reply."""
    score = body.get("scores")
    if score is None:
        score = body.get("rewards")
    return body.get("rewards"), score, body.get("extra_logs") or {}


def t_openrlhf_scores(w):
    prompt = "What is 2+2? Answer: "
    cases = [([prompt + "4"], [prompt], ["4"], [1.0]),
             ([prompt + "5"], [prompt], ["4"], [0.0]),
             # a batch, as older OpenRLHF and its reference server send;
             # labels of any JSON type reach the program as they are
             ([prompt + "4", prompt + "22", "x" + prompt + "7"], [prompt] * 3, ["4", {"answer": "22"}, "7"],
              [1.0, 1.0, 0.0])]
    for queries, prompts, labels, want in cases:
        status, rid, body = openrlhf_post(w, "acme", queries, prompts, labels)
        rewards, scores, logs = openrlhf_reads(body)
        if status != 200 or rewards != want or scores != want or logs:
            return "acme %s: HTTP %d %s" % (labels, status, body)
        booked = w.outcomes(rid)
        if len(booked) != 1 or booked[0]["tenant"] != "acme" or booked[0]["mode"] != "batch" \
                or booked[0]["cause"] != "ok" or booked[0]["n_scores"] != len(want):
            return "acme %s: booked %s" % (labels, booked)
    # Another tenant's token: its own program, booked to it.
    status, rid, body = openrlhf_post(w, "rival", [prompt + "4"], [prompt], ["4"])
    booked = w.outcomes(rid)
    if status != 200 or body["rewards"] != [0.5] or len(booked) != 1 or booked[0]["tenant"] != "rival":
        return "rival: HTTP %d %s, booked %s" % (status, body, booked)
    return None


def t_openrlhf_violation(w):
    status, rid, body = openrlhf_post(w, "acme", ["q: a"], ["q: "], ["__egress__"])
    rewards, scores, _ = openrlhf_reads(body)
    sg = body.get("sandguard") or {}
    if status != 200 or rewards is not None or scores is not None \
            or sg.get("cause") != "tenant_policy_violation" or sg.get("rule") != "egress":
        return "HTTP %d %s" % (status, body)
    booked = w.outcomes(rid)
    if len(booked) != 1 or booked[0]["tenant"] != "acme" or booked[0]["cause"] != "tenant_policy_violation" \
            or booked[0]["rule"] != "egress" or booked[0]["class"] != "tenant_code":
        return "booked %s" % booked
    if not w.agent.events_matching(type="sandbox_killed", tenant="acme", rule="egress"):
        return "the agent saw no egress event"
    return None


def t_openrlhf_refused(w):
    before = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    ok = {"query": ["a"], "prompts": ["a"], "labels": ["x"]}
    cases = [
        (401, "/openrlhf/get_reward", ok, "token is required"),
        (401, "/t/%s/openrlhf/get_reward" % secrets.token_urlsafe(32), ok, "unknown token"),
        (400, None, dict(ok, query="a"), "\"query\" is required"),
        (400, None, dict(ok, prompts=["a", "b"]), "one per sample"),
        (400, None, {"query": ["a"], "prompts": ["a"]}, "\"labels\" is required"),
        (400, None, dict(ok, query=[1]), "\"query\"[0] must be a string"),
        (400, None, dict(ok, extra=1), "unknown key"),
        (400, None, {"query": [], "prompts": [], "labels": []}, "non-empty"),
        (400, "coder", ok, "has no reward program"),
    ]
    for want, path, body, words in cases:
        if path is None or not path.startswith("/"):
            path = "/t/%s/openrlhf/get_reward" % w.tokens[path or "acme"]
        status, _, resp = w.srv.post(path, body)
        if status != want or words not in resp.get("error", ""):
            return "%s %s: HTTP %d %s" % (path[:12], body, status, resp)
    after = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    return None if after == before else "%d bookings for refused requests" % (after - before)


# ---- rLLM: Together's /tci/execute ----------------------------------------

def tci_post(w, body, path="/tci/execute", token=None, tenant="coder"):
    """What together's code_interpreter.run sends: JSON, Bearer API key."""
    headers = {"Authorization": "Bearer " + (token or w.tokens[tenant])}
    status, r, resp = w.srv.post(path, body, headers, timeout=60)
    return status, r.getheader("X-Sandguard-Request-Id"), resp


def together_reads(resp):
    """TogetherCodeTool.forward's reading: (stdout, error): each type's
    items joined by newlines, stripped; the last "error" item."""
    by_type = {}
    for item in resp["data"]["outputs"]:
        by_type.setdefault(item["type"], []).append(item["data"])
    stdout = "\n".join(by_type.get("stdout", [])).strip()
    return stdout or None, (by_type.get("error") or [None])[-1]


def t_tci(w):
    good = tests_script(SUM, [("1 2\n", "3"), ("40 2\n", "42")])
    bad = tests_script("print(0)", [("1 2\n", "3")])
    cases = [("/tci/execute", good, "ok", None), ("//tci/execute", good, "ok", None),
             ("/v1/tci/execute", bad, "tenant_crash", None), ("/tci/execute", EGRESS, "tenant_policy_violation",
                                                              "egress")]
    for path, code, cause, rule in cases:
        status, rid, resp = tci_post(w, {"code": code, "language": "python"}, path)
        if status != 200 or not isinstance(resp.get("data", {}).get("session_id"), str):
            return "%s: HTTP %d %s" % (path, status, resp)
        stdout, error = together_reads(resp)
        correct = not error                 # rLLM: all_passed = not tool_response.error
        if correct != (cause == "ok") or resp["sandguard"]["cause"] != cause or resp["sandguard"]["rule"] != rule:
            return "%s %s: %s" % (path, cause, resp)
        if cause == "ok" and stdout != "All tests passed successfully!":
            return "stdout %r" % stdout
        booked = w.outcomes(rid)
        if len(booked) != 1 or booked[0]["tenant"] != "coder" or booked[0]["mode"] != "run" \
                or booked[0]["cause"] != cause or booked[0]["rule"] != rule:
            return "%s: booked %s" % (cause, booked)
    # Files, as the SDK sends them.
    status, _, resp = tci_post(w, {"code": "print(open('data.txt').read() + open('b.bin').read())",
                                   "language": "python",
                                   "files": [{"name": "data.txt", "encoding": "string", "content": "4"},
                                             {"name": "b.bin", "encoding": "base64", "content": "Mg=="}]})
    if status != 200 or together_reads(resp)[0] != "42":
        return "files: HTTP %d %s" % (status, resp)
    return None


def t_openrlhf_deep_labels(w):
    """Labels may be any JSON values, and the endpoint encodes them again
    on the request's worker (256 KiB of stack): jansson's encoder recurses
    ~300 bytes a level with no bound, and 1,000-deep labels stopped serve
    (SIGSEGV). A body nested past 64 levels is a 400 before it is parsed,
    never booked; 64 levels are taken."""
    before = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    # Written out: Python's own json.dumps stops at ~1,000 levels.
    deep = b'{"query": ["q: 4"], "prompts": ["q: "], "labels": [' + b"[" * 999 + b"0" + b"]" * 999 + b"]}"
    status, _, body = w.srv.post("/t/%s/openrlhf/get_reward" % w.tokens["acme"], deep, {"Accept": "*/*"})
    if status != 400 or "nests 1001 levels deep; at most 64" not in body.get("error", ""):
        return "1,000-deep labels: HTTP %d %s" % (status, str(body)[:300])
    ok = {"answer": 4}
    for _ in range(61):  # the body, its labels array, 61 levels, and the label's object: 64
        ok = [ok]
    status, _, body = openrlhf_post(w, "acme", ["q: 4"], ["q: "], [ok])
    if status != 200:
        return "64 levels: HTTP %d %s" % (status, str(body)[:300])
    after = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    if after != before + 1:
        return "%d bookings, want 1 (the 64-level request's)" % (after - before)
    return None


def t_tci_refused(w):
    before = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    ok = {"code": "print(1)", "language": "python"}
    cases = [(401, dict(token=secrets.token_urlsafe(32)), ok, "unknown token"),
             (400, {}, dict(ok, session_id="ses_1"), "no session"),
             (400, {}, dict(ok, language="javascript"), "\"language\" must be \"python\""),
             (400, {}, {"language": "python"}, "\"code\" is required"),
             (400, {}, dict(ok, files=[{"name": "a", "content": "x"}]), "files[0]"),
             (400, {}, dict(ok, files=[{"name": "/etc/x", "encoding": "string", "content": "x"}]),
              "not a relative path"),
             (400, {}, dict(ok, timeout=-1), "\"timeout\""),
             (400, {}, dict(ok, stdin="x"), "unknown key")]
    for want, kw, body, words in cases:
        status, _, resp = tci_post(w, body, **kw)
        if status != want or words not in resp.get("error", ""):
            return "%s: HTTP %d %s" % (body, status, resp)
    status, _, resp = w.srv.post("/tci/execute", ok)
    if status != 401:
        return "no token: HTTP %d %s" % (status, resp)
    after = len(sgjournal.read(w.agent.env["SANDGUARD_STATE_DIR"]))
    return None if after == before else "%d bookings for refused requests" % (after - before)


def t_codetool(w):
    tool = SandguardCodeTool("http://127.0.0.1:%d" % w.srv.port, w.tokens["coder"])
    out = tool(code="print(6 * 7)", timeout=12)
    if out.stdout != "42" or out.error or out.to_string() != "42":
        return "print: %s" % out
    good = tool.forward(tests_script(SUM, [("1 2\n", "3")]), timeout=12)
    bad = tool.forward(tests_script(SUM, [("1 2\n", "4")]), timeout=12)
    if good.error or not bad.error or "Test failed" not in bad.stdout:
        return "verdicts: %s / %s" % (good, bad)
    slow = tool.forward("import time\ntime.sleep(60)", timeout=30)   # the policy's 3 s apply
    sg = slow.metadata["sandguard"]
    if not slow.error or sg["cause"] != "tenant_timeout" or sg["timeout_ms"] != 3000:
        return "timeout: %s" % slow
    hostile = tool.forward(EGRESS, timeout=5)
    sg = hostile.metadata["sandguard"]
    if not hostile.error or sg["cause"] != "tenant_policy_violation" or sg["rule"] != "egress":
        return "violation: %s" % hostile
    booked = w.outcomes(sg["request_id"])
    if len(booked) != 1 or booked[0]["tenant"] != "coder" or booked[0]["rule"] != "egress":
        return "violation booked %s" % booked
    try:
        out = SandguardCodeTool("http://127.0.0.1:%d" % w.srv.port, w.tokens["broken"]).forward("print(1)")
        return "a platform fault came back as a result: %s" % out
    except SandguardUnavailable as e:   # 500, or 504 when its retries did not fit in time
        if "platform error" not in str(e):
            return "platform fault: %s" % e
    try:
        SandguardCodeTool("http://127.0.0.1:%d" % w.srv.port, secrets.token_urlsafe(32)).forward("print(1)")
        return "an unknown token ran"
    except ValueError as e:
        if "401" not in str(e):
            return "unknown token: %s" % e
    return None


def t_alive(w):
    code = w.srv.proc.poll()
    return None if code is None else "the server exited %s" % code


def main():
    if not can_run("serve trainers"):
        return 0
    env = Env()
    agent = Agent({}, name="trainers")
    srv = None
    try:
        reward = agent.program("reward.py", REWARD)
        half = agent.program("half.py", HALF)
        agent.write_policy("acme", {"reward": {"command": ["/usr/bin/python3", reward]}})
        agent.write_policy("rival", {"reward": {"command": ["/usr/bin/python3", half]}})
        agent.write_policy("coder", {})
        agent.write_policy("broken", {"files": {"scratch_root": os.path.join(reward, "scratch")}})
        tokens_dir = os.path.join(env.dir, "tokens")
        os.makedirs(tokens_dir)
        tokens = {}
        for tenant in ("acme", "rival", "coder", "broken"):
            tokens[tenant] = secrets.token_urlsafe(32)
            with open(os.path.join(tokens_dir, tenant), "w") as f:
                f.write(tokens[tenant] + "\n")
            os.chmod(os.path.join(tokens_dir, tenant), 0o600)
        if not agent.start():
            report("SKIP", "serve trainers", "the agent did not start: %s" % agent.log_tail())
            return 0
        srv = Server(env, "--tokens", tokens_dir, "--policy-dir", agent.policy_dir,
                     env_override=dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE)))
        w = World(agent, env, srv, tokens)
        run_cases([("openrlhf: exact request, each tenant's program, labels, booking", t_openrlhf_scores),
                   ("openrlhf: a violation is booked to its cause, no reward", t_openrlhf_violation),
                   ("openrlhf: bad shapes and credentials are 4xx, never booked", t_openrlhf_refused),
                   ("openrlhf: labels nested past 64 levels are a 400, serve lives", t_openrlhf_deep_labels),
                   ("rllm: together tci/execute, verdicts and booking", t_tci),
                   ("rllm: tci bad shapes and credentials are 4xx, never booked", t_tci_refused),
                   ("rllm: the shipped SandguardCodeTool", t_codetool),
                   ("server alive", t_alive)], (w,), srv.log_tail)
    finally:
        for done in (srv.stop if srv else None, agent.cleanup, env.cleanup):
            if done:
                done()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
