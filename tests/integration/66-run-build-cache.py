#!/usr/bin/python3
"""The /run_code build cache (src/serve/run_build_cache.h), C++ through a
real `sandguard serve` with a private agent enforcing:

  once      15 identical verl-style requests at once: one compile booked,
            all 15 right, the same compile_result in every reply, 14 of
            them sandguard.build_cached
  reuse     a 16th, later: no compile, the first's compile_result
  tenants   another tenant sending the identical code compiles its own:
            its own entry, in its own directory, under another key
  on disk   every entry is 0600, of root, in 0700 directories of root;
            a sandbox of the tenant cannot read its own entry
  corrupt   an entry with one byte changed, and one truncated, is refused
            (the server says so), compiled again and right
  errors    identical compile errors at once: each compiles (none kept),
            none waits for another in turn

Prints PASS/FAIL/SKIP lines; details on stderr."""
import concurrent.futures
import json
import os
import stat
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import report  # noqa: E402
from sgserve import verl_request, verl_verdict  # noqa: E402
import sgjournal  # noqa: E402
import sglangs  # noqa: E402

N = 15
CODE = sglangs.CORRECT["cpp"] + "// build cache %d\n" % os.getpid()


def compiles(agent, tenant):
    """The compiles booked for the tenant's /run_code requests."""
    return [o for o in sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])
            if o["tenant"] == tenant and o["batch_id"].endswith(".compile") and o["final"]]


def post(srv, tenant, code=CODE, stdin="40 2"):
    status, _, resp = srv.post("/tenants/%s/run_code" % tenant, verl_request(code, stdin, language="cpp"),
                               timeout=300)
    if status != 200:
        raise AssertionError("HTTP %d %s" % (status, resp))
    return resp


def entries(agent, tenant):
    d = os.path.join(agent.env["SANDGUARD_STATE_DIR"], "build-cache", tenant)
    return [os.path.join(d, f) for f in os.listdir(d)] if os.path.isdir(d) else []


def case_once(srv, agent, tenant):
    with concurrent.futures.ThreadPoolExecutor(N) as pool:
        replies = list(pool.map(lambda _: post(srv, tenant), range(N)))
    verdicts = [verl_verdict(r, "42") for r in replies]
    cached = sum(r["sandguard"]["build_cached"] for r in replies)
    results = {json.dumps(r["compile_result"], sort_keys=True) for r in replies}
    booked = compiles(agent, tenant)
    if verdicts != [True] * N or len(booked) != 1 or cached != N - 1 or len(results) != 1:
        return "verdicts %s, %d compiles booked, %d cached, %d distinct compile_results" % (
            verdicts, len(booked), cached, len(results)), None
    return None, replies[0]["compile_result"]


def case_reuse(srv, agent, tenant, first):
    r = post(srv, tenant, stdin="1 2")
    if verl_verdict(r, "3") is not True or not r["sandguard"]["build_cached"] or r["compile_result"] != first \
            or len(compiles(agent, tenant)) != 1 or any(b.endswith(".compile") for b in r["sandguard"]["batch_ids"]):
        return "reply %s; compiles %d" % (json.dumps(r)[:800], len(compiles(agent, tenant)))
    return None


def case_tenants(srv, agent, tenant, other):
    r = post(srv, other)
    mine, theirs = entries(agent, tenant), entries(agent, other)
    if verl_verdict(r, "42") is not True or r["sandguard"]["build_cached"] or len(compiles(agent, other)) != 1:
        return "the other tenant's request: %s" % json.dumps(r)[:800]
    if len(mine) != 1 or len(theirs) != 1 or os.path.basename(mine[0]) == os.path.basename(theirs[0]):
        return "entries %s and %s" % (mine, theirs)
    return None


def case_on_disk(srv, agent, tenant):
    path = entries(agent, tenant)[0]
    for p in (path, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        st = os.lstat(p)
        want = 0o600 if p == path else 0o700
        if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != want:
            return "%s: uid %d mode %o (want root, %o)" % (p, st.st_uid, stat.S_IMODE(st.st_mode), want)
    probe = ("#include <cstdio>\nint main() { FILE *f = std::fopen(\"%s\", \"r\");"
             " std::puts(f ? \"opened\" : \"refused\"); }\n" % path)
    r = post(srv, tenant, code=probe)
    if verl_verdict(r, "refused") is not True:
        return "a sandbox read its own entry: %s" % json.dumps(r)[:800]
    return None


def case_corrupt(srv, agent, tenant, path):
    for how in ("one byte changed", "truncated"):
        if not os.path.exists(path):
            return "%s: no entry %s (entries %s)" % (how, path, entries(agent, tenant))
        with open(path, "r+b") as f:
            data = f.read()
            if how == "truncated":
                f.truncate(len(data) - 100)
            else:
                f.seek(len(data) - 200)
                f.write(bytes([data[-200] ^ 0x40]))
        before = len(compiles(agent, tenant))
        r = post(srv, tenant)
        if verl_verdict(r, "42") is not True or r["sandguard"]["build_cached"] or \
                len(compiles(agent, tenant)) != before + 1:
            return "%s: %s; compiles %d -> %d" % (how, json.dumps(r)[:800], before, len(compiles(agent, tenant)))
        if "refused" not in srv.log_tail(20000):
            return "%s: the server did not say it refused the entry" % how
    return None


def case_errors(srv, agent, tenant):
    before = len(compiles(agent, tenant))
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(lambda _: post(srv, tenant, code=sglangs.BROKEN["cpp"]), range(3)))
    got = [verl_verdict(r, "42") for r in replies]
    if got != [-4] * 3 or any(r["sandguard"]["build_cached"] for r in replies) or \
            len(compiles(agent, tenant)) != before + 3:
        return "verdicts %s, compiles %d -> %d" % (got, before, len(compiles(agent, tenant)))
    return None


def one(lang, srv, agent):
    tenant, other = "bc-cpp", "bc2-cpp"
    with open(os.path.join(agent.policy_dir, tenant + ".json")) as f:
        p = json.load(f)
    p["tenant"] = other
    with open(os.path.join(agent.policy_dir, other + ".json"), "w") as f:
        json.dump(p, f)
    why, first = case_once(srv, agent, tenant)
    report("FAIL" if why else "PASS", "%d identical requests at once compile once, the same "
           "compile_result for all" % N, why or "")
    if why:
        return None
    entry = entries(agent, tenant)[0]
    for name, case in [("a later identical request reuses the build and its compile_result",
                        lambda: case_reuse(srv, agent, tenant, first)),
                       ("another tenant's identical code gets a build of its own",
                        lambda: case_tenants(srv, agent, tenant, other)),
                       ("entries are root's, 0600 in 0700 directories, unreadable from a sandbox",
                        lambda: case_on_disk(srv, agent, tenant)),
                       ("a changed or truncated entry is refused and compiled again",
                        lambda: case_corrupt(srv, agent, tenant, entry)),
                       ("a compile error is never reused: identical ones at once each compile",
                        lambda: case_errors(srv, agent, tenant))]:
        why = case()
        report("FAIL" if why else "PASS", name, why or "")
    return None


def main():
    return sglangs.serve_each("build cache", "bc-", one, "the cases above ran", languages=["cpp"])


if __name__ == "__main__":
    sys.exit(main())
