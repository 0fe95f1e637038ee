"""The outcome journal as tests see it, and the exactly-once check.

The journal is <state>/journal/outcomes-NNNNNNNNNN.jsonl, one JSON record
per line (src/telemetry/journal_record.h has the format). The agent's
ledger is its fold: the first record of each outcome id counts, later ones
are ignored. This module reads the journal, folds it the same way, and
compares the result with the agent's ledger (`sandguard top --json`), so
that suites (and the chaos stage) can say "N outcomes, 0 lost, 0 twice".

    sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
    import sgjournal
    records = sgjournal.read(state_dir)
    report = sgjournal.exactly_once(state_dir, top_json)
"""
import collections
import json
import os
import re
import time

SEGMENT = re.compile(r"^outcomes-(\d{10})\.jsonl$")


def journal_dir(state_dir):
    return os.path.join(state_dir, "journal")


def segments(state_dir):
    """The segment paths, oldest first."""
    d = journal_dir(state_dir)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    found = sorted((int(m.group(1)), n) for n in names for m in [SEGMENT.match(n)] if m)
    return [os.path.join(d, n) for _, n in found]


def read(state_dir, bad=None):
    """Every complete record, in journal order. Lines that are not records
    (a torn write) are skipped, and appended to `bad` when given."""
    out = []
    paths = segments(state_dir)
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        if lines and lines[-1] != b"" and path == paths[-1]:
            if bad is not None:
                bad.append(lines[-1])  # still being written, or torn
        # A closed segment's unterminated last line is a line, as the
        # agent's reader takes it (src/telemetry/journal_read.h).
        for raw in lines[:-1] if path == paths[-1] or lines[-1] == b"" else lines:
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or "id" not in rec:
                    raise ValueError
                out.append(rec)
            except ValueError:
                if bad is not None:
                    bad.append(raw)
    return out


def fold(records):
    """The records that count: the first of each outcome id."""
    seen, out = set(), []
    for r in records:
        if r["id"] not in seen:
            seen.add(r["id"])
            out.append(r)
    return out


def per_tenant(records):
    """{tenant: {"attempts", "batches", "finals_by_batch", "causes"}} of folded records."""
    t = collections.defaultdict(lambda: {"attempts": 0, "batches": 0, "causes": collections.Counter(),
                                         "finals_by_batch": collections.Counter()})
    for r in fold(records):
        row = t[r["tenant"]]
        row["attempts"] += 1
        if r["cause"] != "ok":
            row["causes"][(r["cause"], r["class"])] += 1
        if r["final"]:
            row["batches"] += 1
            row["finals_by_batch"][r["batch_id"]] += 1
    return t


def exactly_once(state_dir, top, batch_ids=None):
    """Compare the journal with the agent's ledger (the parsed output of
    `sandguard top --json`). `batch_ids`: {tenant: set of batch ids} the
    test ran; each must have exactly one final record in the journal.
    Returns {"records", "outcomes", "duplicates_ignored", "lost",
    "counted_twice", "batches_without_final", "batches_with_two_finals",
    "problems": [str]}; problems is empty when all is well."""
    records = read(state_dir)
    folded = fold(records)
    want = per_tenant(records)
    got = {row["tenant"]: row for row in top.get("tenants", [])}
    problems = []
    lost = twice = 0
    for tenant, w in sorted(want.items()):
        g = got.get(tenant)
        batches = (g["batches_ok"] + g["batches_failed"]) if g else 0
        attempts = g.get("attempts", 0) if g else 0
        if batches < w["batches"] or attempts < w["attempts"]:
            lost += max(w["batches"] - batches, w["attempts"] - attempts)
        if batches > w["batches"] or attempts > w["attempts"]:
            twice += max(batches - w["batches"], attempts - w["attempts"])
        if batches != w["batches"] or attempts != w["attempts"]:
            problems.append("%s: journal has %d batches / %d attempts, ledger %d / %d"
                            % (tenant, w["batches"], w["attempts"], batches, attempts))
    no_final, two_finals = [], []
    for tenant, ids in sorted((batch_ids or {}).items()):
        finals = want[tenant]["finals_by_batch"] if tenant in want else collections.Counter()
        no_final += ["%s/%s" % (tenant, b) for b in sorted(ids) if finals[b] == 0]
        two_finals += ["%s/%s" % (tenant, b) for b in sorted(ids) if finals[b] > 1]
    if no_final:
        problems.append("%d batches have no final record: %s" % (len(no_final), no_final[:5]))
    if two_finals:
        problems.append("%d batches have two final records: %s" % (len(two_finals), two_finals[:5]))
    return {"records": len(records), "outcomes": len(folded),
            "duplicates_ignored": len(records) - len(folded), "lost": lost, "counted_twice": twice,
            "batches_without_final": len(no_final), "batches_with_two_finals": len(two_finals),
            "problems": problems}


def summary(report):
    return ("%(records)d records, %(outcomes)d outcomes (%(duplicates_ignored)d duplicate ids "
            "ignored): %(lost)d lost, %(counted_twice)d counted twice, %(batches_without_final)d "
            "batches without a final record, %(batches_with_two_finals)d with two" % report)


def _json_of(r):
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


def top(agent, *args):
    """`sandguard top --json` through agent.run() (tests/lib/sgagent.py)."""
    return _json_of(agent.run(["top", "--json"] + list(args)))


def status(agent):
    return _json_of(agent.run(["status", "--json"]))


def settled(agent, timeout=60):
    """The agent's ledger (top --json) once it has folded every outcome of
    the journal: it folds as the journal grows, and no sleep stands in for
    that."""
    state = agent.env["SANDGUARD_STATE_DIR"]
    want = len(fold(read(state)))
    deadline = time.time() + timeout
    t = {}
    while time.time() < deadline:
        t = top(agent)
        if t.get("source") == "agent" and \
                sum(r.get("attempts", 0) for r in t.get("tenants", [])) >= want:
            break
        time.sleep(0.1)
    return t
