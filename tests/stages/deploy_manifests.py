#!/usr/bin/python3
"""Static checks of deploy/: every YAML document parses, and the fields that
matter hold (node selection, privileges, host mounts, policies, agent flags,
metrics, probes, resources, the PodMonitor, the Dockerfile; for serve: its
DaemonSet beside the agent's, flags, tokens Secret, probes, drain, the
Service). Prints one PASS/FAIL line per check; run by tests/stages/deploy.sh.

usage: deploy_manifests.py SRC SANDGUARD_BIN
Optional env: SG_MEASURED_IDLE_KB, SG_MEASURED_PEAK_KB (the agent's, from the
live run), SG_MEASURED_SERVE_PEAK_KB (serve's)."""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import exit_code, report  # noqa: E402

SRC, BIN = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SRC, "deploy")

# What the DaemonSet must look like (the brief and deploy/README.md).
HOST_MOUNTS = {  # host path -> (mounted read-only?, needs HostToContainer?)
    "/sys/fs/bpf": (False, True),
    "/sys/fs/cgroup": (False, True),
    "/sys/kernel/btf": (True, False),
    "/sys/kernel/security": (True, False),
    "/sys/kernel/tracing": (True, False),
    "/run/sandguard": (False, False),
    "/var/lib/sandguard": (False, False),
}
REQUIRED_CAPS = {"BPF", "PERFMON", "NET_ADMIN"}
ALLOWED_CAPS = REQUIRED_CAPS | {"KILL"}
AGENT_FLAGS = {
    "--policy-dir": "/etc/sandguard/policies",
    "--events": "/run/sandguard/events.jsonl",
    "--metrics": "0.0.0.0:9464",
    "--state-dir": "/var/lib/sandguard",
}
# The init container that creates the agent's cgroup root, and its one capability.
CGROUP_INIT = "create-sandguard-cgroup"
CGROUP_INIT_CAPS = ["DAC_OVERRIDE"]
REWARD_LABEL = "sandguard.io/reward-node"
BINARY = "/usr/local/bin/sandguard"
MIB = 1024 * 1024


def check_fn(name, fn):
    try:
        why = fn()
        report("PASS", name, why or "")
    except AssertionError as e:
        report("FAIL", name, str(e) or "assertion failed")
    except (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        report("FAIL", name, "%s: %s" % (type(e).__name__, e))


def quantity(q):
    """Kubernetes memory quantity -> bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", str(q))
    assert m, "unparsable quantity %r" % q
    mult = {None: 1, "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3}
    return int(m.group(1)) * mult[m.group(2)]


# ---- parse everything -------------------------------------------------------
docs = []
for path in sorted(glob.glob(os.path.join(DEPLOY, "*.yaml"))):
    try:
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d is not None:
                    docs.append((os.path.basename(path), d))
        report("PASS", "yaml-parse %s" % os.path.basename(path))
    except yaml.YAMLError as e:
        report("FAIL", "yaml-parse %s" % os.path.basename(path), str(e).replace("\n", " "))


def only(kind, name=None):
    found = [d for _, d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, "expected one %s%s, found %d" % (kind, " " + name if name else "", len(found))
    return found[0]


try:
    ds = only("DaemonSet", "sandguard-agent")
    pod = ds["spec"]["template"]["spec"]
    agent = [c for c in pod["containers"] if c["name"] == "agent"][0]
    sds = only("DaemonSet", "sandguard-serve")
    spod = sds["spec"]["template"]["spec"]
    serve = [c for c in spod["containers"] if c["name"] == "serve"][0]
except (AssertionError, KeyError, IndexError) as e:
    report("FAIL", "daemonsets-present", str(e))
    print("deploy manifests: cannot go on without both DaemonSets")
    sys.exit(1)
args = agent.get("args", [])
flag = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
mounts = {m["mountPath"]: m for m in agent.get("volumeMounts", [])}
volumes = {v["name"]: v for v in pod.get("volumes", [])}


def t_node_selection():
    assert pod.get("nodeSelector", {}).get(REWARD_LABEL) == "true", "nodeSelector %s=true missing" % REWARD_LABEL
    effects = {t.get("effect") for t in pod.get("tolerations", [])
               if t.get("key") == REWARD_LABEL and t.get("operator") == "Exists"}
    assert {"NoSchedule", "NoExecute"} <= effects, "tolerations for %s: %s" % (REWARD_LABEL, effects)
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(), \
        "selector does not match the pod labels"


def t_privileges():
    for c in pod.get("initContainers", []) + pod["containers"]:
        sc = c.get("securityContext", {})
        assert not sc.get("privileged"), "%s: privileged: true" % c["name"]
        assert sc.get("allowPrivilegeEscalation") is False, "%s: allowPrivilegeEscalation not false" % c["name"]
        assert sc.get("readOnlyRootFilesystem") is True, "%s: root filesystem writable" % c["name"]
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], "%s: capabilities not dropped" % c["name"]
        assert sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "%s: seccomp not RuntimeDefault" % c["name"]
    add = set(agent["securityContext"]["capabilities"].get("add", []))
    assert REQUIRED_CAPS <= add, "agent lacks %s" % sorted(REQUIRED_CAPS - add)
    assert add <= ALLOWED_CAPS, "agent adds %s beyond what it needs" % sorted(add - ALLOWED_CAPS)
    for c in pod.get("initContainers", []):
        want = CGROUP_INIT_CAPS if c["name"] == CGROUP_INIT else []
        assert c["securityContext"]["capabilities"].get("add", []) == want, \
            "%s adds %s, want %s" % (c["name"], c["securityContext"]["capabilities"].get("add"), want)
    for k in ("hostPID", "hostNetwork", "hostIPC"):
        assert pod.get(k) is False, "%s must be false (see deploy/README.md)" % k
    assert pod.get("automountServiceAccountToken") is False, "service account token mounted"
    return "adds %s, drops the rest" % ",".join(sorted(add))


def t_caps_documented():
    text = open(os.path.join(DEPLOY, "README.md")).read()
    add = agent["securityContext"]["capabilities"].get("add", [])
    missing = [c for c in add if not re.search(r"CAP_%s\b" % c, text)]
    assert not missing, "deploy/README.md does not explain %s" % missing
    for word in ("hostPID", "appArmorProfile", "seLinuxOptions", "CAP_SYS_ADMIN"):
        assert word in text, "deploy/README.md does not discuss %s" % word


def t_cgroup_init():
    """The agent (no DAC capability) cannot add a directory to the 0555
    cgroup2 root: an init container does, as the agent's uid so that the
    agent owns it, with the node's cgroupfs as its only mount, after
    check-host-mounts has seen a cgroup2 /sys/fs/cgroup."""
    inits = pod.get("initContainers", [])
    names = [c["name"] for c in inits]
    assert CGROUP_INIT in names, "no %s init container: the agent cannot create its cgroup root" % CGROUP_INIT
    assert names.index(CGROUP_INIT) > names.index("check-host-mounts"), "%s runs before check-host-mounts" % CGROUP_INIT
    c = inits[names.index(CGROUP_INIT)]
    sc, asc = c["securityContext"], agent["securityContext"]
    assert sc.get("capabilities", {}).get("add") == CGROUP_INIT_CAPS, "%s adds %s, want %s" % (
        CGROUP_INIT, sc.get("capabilities", {}).get("add"), CGROUP_INIT_CAPS)
    assert sc.get("runAsUser") == asc.get("runAsUser") == 0, "%s must run as the agent's uid 0" % CGROUP_INIT
    cg = mounts["/sys/fs/cgroup"]["name"]
    got = [(m["name"], m["mountPath"], bool(m.get("readOnly"))) for m in c.get("volumeMounts", [])]
    assert got == [(cg, "/sys/fs/cgroup", False)], "%s mounts %s, want only the cgroup volume, writable" % (CGROUP_INIT, got)
    script = " ".join(c.get("command", []))
    assert "/sys/fs/cgroup/sandguard" in script and "SANDGUARD_CGROUP_ROOT" in script, \
        "%s does not create the agent's root (<cgroup2>/sandguard, or $SANDGUARD_CGROUP_ROOT)" % CGROUP_INIT
    text = open(os.path.join(DEPLOY, "README.md")).read()
    assert CGROUP_INIT in text and "CAP_DAC_OVERRIDE" in text, "deploy/README.md does not explain %s" % CGROUP_INIT
    return "%s adds only %s, mounts only the cgroup volume" % (CGROUP_INIT, ",".join(CGROUP_INIT_CAPS))


def t_host_mounts():
    for host, (ro, propagate) in HOST_MOUNTS.items():
        vol = [v for v in volumes.values() if v.get("hostPath", {}).get("path") == host]
        assert vol, "no hostPath volume for %s" % host
        m = mounts.get(host)
        assert m and m["name"] == vol[0]["name"], "%s not mounted at the same path in the agent" % host
        assert bool(m.get("readOnly")) == ro, "%s: readOnly should be %s" % (host, ro)
        if propagate:
            assert m.get("mountPropagation") == "HostToContainer", "%s: needs mountPropagation HostToContainer" % host
        assert "subPath" not in m, "%s: subPath" % host
    extra = [v["hostPath"]["path"] for v in volumes.values()
             if "hostPath" in v and v["hostPath"]["path"] not in HOST_MOUNTS and v["hostPath"]["path"] != "/"]
    assert not extra, "unexpected host paths %s" % extra


def t_host_root():
    hr = flag.get("--host-root")
    assert hr, "no --host-root: policy paths would name the image's files, not the node's"
    m = mounts.get(hr)
    assert m, "--host-root %s is not a volume mount" % hr
    v = volumes[m["name"]]
    assert v.get("hostPath", {}).get("path") == "/", "--host-root is not the node's /"
    assert m.get("readOnly") is True, "the node's / must be mounted read-only"
    assert m.get("mountPropagation") == "HostToContainer", "--host-root needs HostToContainer"


def t_policies():
    pd = flag.get("--policy-dir")
    m = mounts.get(pd)
    assert m, "--policy-dir %s is not a volume mount" % pd
    v = volumes[m["name"]]
    assert "configMap" in v, "--policy-dir is not a ConfigMap volume"
    assert "subPath" not in m, "a subPath mount never sees ConfigMap updates"
    cm = only("ConfigMap", v["configMap"]["name"])
    keys = sorted(cm.get("data", {}))
    assert keys and all(re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}\.json", k) for k in keys), "keys %s" % keys
    assert "default.json" in keys, "no default.json in the ConfigMap"
    return "ConfigMap %s: %s" % (cm["metadata"]["name"], ", ".join(keys))


def t_args():
    for k, want in AGENT_FLAGS.items():
        assert flag.get(k) == want, "%s is %r, want %r" % (k, flag.get(k), want)
    helptext = subprocess.run([BIN, "agent", "--help"], capture_output=True, text=True).stdout
    unknown = [a for a in args if a.startswith("--") and not re.search(r"(^|\s)%s\b" % re.escape(a), helptext)]
    assert not unknown, "flags the agent does not have: %s" % unknown
    assert flag.get("--node") == "$(NODE_NAME)", "--node should name the node, not the pod"
    env = {e["name"]: e for e in agent.get("env", [])}
    assert env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"
    events_dir = os.path.dirname(flag["--events"])
    assert events_dir in mounts, "events directory %s is not mounted" % events_dir
    sd = mounts.get(flag["--state-dir"])
    assert sd and "hostPath" in volumes[sd["name"]], "--state-dir is not on a hostPath (the ledger would not survive)"


def t_metrics():
    port = int(flag["--metrics"].rsplit(":", 1)[1])
    ports = {p["name"]: p for p in agent.get("ports", [])}
    assert ports.get("metrics", {}).get("containerPort") == port, "containerPort 'metrics' != %d" % port
    ann = ds["spec"]["template"]["metadata"].get("annotations", {})
    assert ann.get("prometheus.io/scrape") == "true", "prometheus.io/scrape"
    assert ann.get("prometheus.io/port") == str(port), "prometheus.io/port"
    assert ann.get("prometheus.io/path") == "/metrics", "prometheus.io/path"


def t_probes():
    ready = agent.get("readinessProbe", {}).get("httpGet", {})
    assert ready.get("path") == "/readyz" and ready.get("port") == "metrics", "readiness must GET /readyz on metrics"
    start = agent.get("startupProbe", {}).get("httpGet", {})
    assert start.get("path") == "/readyz", "startupProbe must GET /readyz"
    live = agent.get("livenessProbe", {}).get("exec", {}).get("command", [])
    assert live == [BINARY, "status", "--check"], "liveness must exec '%s status --check'" % BINARY
    assert agent["livenessProbe"].get("timeoutSeconds", 1) >= 2, "liveness timeout too tight"


def t_resources():
    res = agent.get("resources", {})
    req, lim = quantity(res["requests"]["memory"]), quantity(res["limits"]["memory"])
    assert "cpu" not in res.get("limits", {}), "no CPU limit: throttling would delay kills"
    idle = int(os.environ.get("SG_MEASURED_IDLE_KB", 16 * 1024)) * 1024
    peak = int(os.environ.get("SG_MEASURED_PEAK_KB", 19 * 1024)) * 1024
    events = int(flag.get("--events-max-bytes", 64 * MIB)) * (int(flag.get("--events-keep", 5)) + 1)
    assert req >= idle, "memory request %d MiB below the idle RSS %d MiB" % (req // MIB, idle // MIB)
    # peak RSS + the event files on the node's /run tmpfs (charged to the pod) + 25% headroom
    need = int((peak + events) * 1.25)
    assert lim >= need, "memory limit %d MiB < peak %d MiB + events %d MiB + 25%%" % (lim // MIB, peak // MIB, events // MIB)
    assert lim <= 4 * need, "memory limit %d MiB is far above what the agent uses (%d MiB)" % (lim // MIB, need // MIB)
    return "request %d MiB, limit %d MiB (idle %.1f, peak %.1f MiB RSS, events tmpfs %d MiB)" % (
        req // MIB, lim // MIB, idle / MIB, peak / MIB, events // MIB)


def t_podmonitor():
    pm = only("PodMonitor")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items(), "PodMonitor selects other pods"
    assert ds["metadata"]["namespace"] in pm["spec"]["namespaceSelector"]["matchNames"], "wrong namespace"
    ep = pm["spec"]["podMetricsEndpoints"][0]
    assert ep["port"] in {p["name"] for p in agent["ports"]} and ep.get("path") == "/metrics", "endpoint"


def t_rule_metrics():
    rules = only("PrometheusRule")
    exprs = " ".join(r["expr"] for g in rules["spec"]["groups"] for r in g["rules"])
    used = set(re.findall(r"\bsandguard_[a-z_]+", exprs))
    src = open(os.path.join(SRC, "src", "agent", "agent_metrics.c")).read()
    known = set(re.findall(r'"(sandguard_[a-z_]+)"', src))
    known |= {k + s for k in known for s in ("_bucket", "_sum", "_count")}
    assert used and used <= known, "rules name metrics the agent does not export: %s" % sorted(used - known)
    for g in rules["spec"]["groups"]:
        for r in g["rules"]:
            assert "docs/oncall.md" in r["annotations"].get("description", ""), "%s: no runbook link" % r["alert"]
    anchors = set(re.findall(r"docs/oncall.md#([a-z0-9-]+)", exprs + json.dumps(rules)))
    doc = open(os.path.join(SRC, "docs", "oncall.md")).read().lower()
    heads = {re.sub(r"[^a-z0-9 -]", "", h).strip().replace(" ", "-") for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    assert anchors <= heads, "runbook anchors missing in docs/oncall.md: %s" % sorted(anchors - heads)


def t_dashboard():
    """The Grafana dashboard's ConfigMap: what deploy/gen-dashboard.sh makes
    of deploy/grafana/sandguard.json, labelled for the Grafana sidecar; its
    queries name only metrics the agent exports and honour $node. (Each
    query's results are tested against a real Prometheus in
    tests/integration/50-prometheus.py.)"""
    cm = only("ConfigMap", "sandguard-grafana-dashboard")
    assert cm["metadata"]["labels"].get("grafana_dashboard") == "1", "no grafana_dashboard: \"1\" label"
    with open(os.path.join(DEPLOY, "grafana", "sandguard.json")) as f:
        dash = json.load(f)
    assert json.loads(cm["data"]["sandguard.json"]) == dash, "the ConfigMap's dashboard is not deploy/grafana/sandguard.json"
    gen = subprocess.run([os.path.join(DEPLOY, "gen-dashboard.sh")], capture_output=True, text=True)
    with open(os.path.join(DEPLOY, "grafana-dashboard.yaml")) as f:
        assert gen.returncode == 0 and gen.stdout == f.read(), \
            "deploy/grafana-dashboard.yaml is not deploy/gen-dashboard.sh's output: regenerate it %s" % gen.stderr
    names = [v["name"] for v in dash["templating"]["list"]]
    assert {"datasource", "node", "tenant"} <= set(names), "template variables %s" % names
    targets = [(p["title"], t) for p in dash["panels"] for t in p.get("targets", [])]
    assert targets, "no panel has a query"
    src = open(os.path.join(SRC, "src", "agent", "agent_metrics.c")).read()
    known = set(re.findall(r'"(sandguard_[a-z_]+)"', src))
    known |= {k + s for k in known for s in ("_bucket", "_sum", "_count")}
    for title, t in targets:
        used = set(re.findall(r"\bsandguard_[a-z_]+", t["expr"]))
        assert used and used <= known, "%s: metrics the agent does not export: %s" % (title, sorted(used - known))
        assert 'node=~"$node"' in t["expr"], "%s: the query ignores $node" % title
        assert t["datasource"]["uid"] == "${datasource}", "%s: not on the $datasource variable" % title
    return "%d panels, %d queries" % (len([p for p in dash["panels"] if p["type"] != "row"]), len(targets))


def t_dockerfile():
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)
    assert len(stages) == 2, "want a build and a runtime stage, found %d" % len(stages)
    assert all(re.match(r"debian:(12|bookworm)", img) for img, _ in stages), "base images %s" % stages
    build_part, run_part = re.split(r"^FROM\s+", text, flags=re.M)[1:3]

    def pkgs(part):
        """Package names of the stage's apt-get install commands."""
        joined = part.replace("\\\n", " ")
        names = set()
        for cmd in re.findall(r"apt-get install([^&\n]*)", joined):
            names |= {w for w in cmd.split() if not w.startswith("-")}
        return names
    need_build = {"make", "gcc", "clang", "bpftool", "pkg-config", "libbpf-dev", "libelf-dev", "zlib1g-dev",
                  "libjansson-dev", "libmicrohttpd-dev", "libssl-dev"}
    assert need_build <= pkgs(build_part), "builder lacks %s" % sorted(need_build - pkgs(build_part))
    assert re.search(r"^RUN make\b", build_part, re.M), "builder does not run make"
    runtime = pkgs(run_part)
    assert not [p for p in runtime if p.endswith("-dev")], "-dev packages in the runtime stage"
    # The binary needs libc alone (tree.sh checks its NEEDED entries) and
    # dlopens libmicrohttpd and libcrypto by the sonames in mhd_lazy.h and
    # crypto_lazy.h: the runtime stage installs those libraries' packages
    # (Debian names libcrypto's libssl<N>) and nothing the binary links in.
    def soname(path, pattern, what):
        m = re.search(pattern, open(os.path.join(SRC, path)).read())
        assert m, "%s names no %s soname" % (path, what)
        return m.group(1)
    mhd = soname("src/lib/mhd_lazy.h", r'#define MHD_LAZY_SONAME "libmicrohttpd\.so\.(\d+)"',
                 "libmicrohttpd")
    crypto = soname("src/artifact/crypto_lazy.h", r'#define CRYPTO_LAZY_SONAME "libcrypto\.so\.(\d+)"',
                    "libcrypto")
    assert runtime == {"libmicrohttpd%s" % mhd, "libssl%s" % crypto}, \
        "runtime packages %s" % sorted(runtime)
    assert re.search(r"COPY --from=\S+ \S*/build/sandguard %s\b" % re.escape(BINARY), run_part), \
        "runtime stage must copy build/sandguard to %s" % BINARY
    ep = json.loads(re.search(r"^ENTRYPOINT\s+(\[.*\])", run_part, re.M).group(1))
    assert ep == [BINARY, "agent"], "ENTRYPOINT %s" % ep
    return "runtime packages: %s" % " ".join(sorted(runtime))


# ---- serve (deploy/serve.yaml) ----------------------------------------------
sargs = serve.get("args", [])
sflag = {sargs[i]: sargs[i + 1] for i in range(len(sargs) - 1)
         if sargs[i].startswith("--") and not sargs[i + 1].startswith("--")}
smounts = {m["mountPath"]: m for m in serve.get("volumeMounts", [])}
svolumes = {v["name"]: v for v in spod.get("volumes", [])}
SERVE_CAPS_REQUIRED = {"SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE", "SETUID", "SETGID", "CHOWN", "FOWNER",
                       "DAC_OVERRIDE"}
SERVE_CAPS_ALLOWED = SERVE_CAPS_REQUIRED | {"KILL"}


def t_serve_beside_agent():
    assert spod.get("nodeSelector") == pod.get("nodeSelector"), "serve's nodeSelector differs from the agent's"
    assert spod.get("tolerations") == pod.get("tolerations"), "serve's tolerations differ from the agent's"
    assert sds["metadata"]["namespace"] == ds["metadata"]["namespace"], "another namespace than the agent's"
    assert sds["spec"]["selector"]["matchLabels"].items() <= sds["spec"]["template"]["metadata"]["labels"].items()
    assert not (sds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()), \
        "serve's selector also selects the agent's pods"
    text = open(os.path.join(DEPLOY, "README.md")).read()
    assert "second DaemonSet" in text, "deploy/README.md does not say why serve is a DaemonSet of its own"


def t_serve_privileges():
    sc = serve["securityContext"]
    assert not sc.get("privileged"), "privileged: true"
    assert sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True
    assert sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities not dropped"
    add = set(sc["capabilities"].get("add", []))
    assert SERVE_CAPS_REQUIRED <= add, "serve lacks %s" % sorted(SERVE_CAPS_REQUIRED - add)
    assert add <= SERVE_CAPS_ALLOWED, "serve adds %s beyond what it needs" % sorted(add - SERVE_CAPS_ALLOWED)
    assert spod.get("hostPID") is True and "--host-namespaces" in sargs, \
        "--host-namespaces (and the hostPID it needs): the executor must see the node's root and cgroup tree"
    for k in ("hostNetwork", "hostIPC"):
        assert spod.get(k) is False, "%s must be false" % k
    assert spod.get("automountServiceAccountToken") is False, "service account token mounted"
    assert not [v for v in svolumes.values() if "hostPath" in v], "hostPath volumes: it joins the node's mounts"
    text = open(os.path.join(DEPLOY, "README.md")).read()
    missing = [c for c in add if not re.search(r"CAP_%s\b" % c, text)]
    assert not missing, "deploy/README.md does not explain %s for serve" % missing
    for word in ("hostPID", "--host-namespaces", "Unconfined"):
        assert word in text, "deploy/README.md does not discuss %s" % word
    return "adds %s" % ",".join(sorted(add))


def t_serve_flags():
    helptext = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    unknown = [a for a in sargs if a.startswith("--") and not re.search(r"(^|\s)%s\b" % re.escape(a), helptext)]
    assert not unknown, "flags serve does not have: %s" % unknown
    port = int(sflag["--listen"].rsplit(":", 1)[1])
    ports = {p["name"]: p for p in serve.get("ports", [])}
    assert ports.get("http", {}).get("containerPort") == port, "containerPort 'http' != --listen's %d" % port
    # Tokens: a Secret, owner-readable only, a directory mount.
    m = smounts.get(sflag.get("--tokens"))
    assert m and "secret" in svolumes[m["name"]], "--tokens is not a Secret volume mount"
    assert svolumes[m["name"]]["secret"].get("defaultMode") == 0o400, "token files must be mode 0400"
    assert "subPath" not in m and m.get("readOnly") is True
    # Policies: the agent's ConfigMap, so that both judge by one policy.
    m = smounts.get(sflag.get("--policy-dir"))
    assert m and "subPath" not in m, "--policy-dir is not a directory mount"
    agent_cm = volumes[mounts[flag["--policy-dir"]]["name"]]["configMap"]["name"]
    assert svolumes[m["name"]].get("configMap", {}).get("name") == agent_cm, "serve reads other policies than the agent"
    return "tokens from Secret %s, policies from ConfigMap %s" % (
        svolumes[smounts[sflag["--tokens"]]["name"]]["secret"]["secretName"], agent_cm)


def t_serve_probes():
    ready = serve.get("readinessProbe", {}).get("httpGet", {})
    assert ready.get("path") == "/readyz" and ready.get("port") == "http", "readiness must GET /readyz on http"
    live = serve.get("livenessProbe", {}).get("httpGet", {})
    assert live.get("path") == "/healthz" and live.get("port") == "http", "liveness must GET /healthz on http"
    assert serve.get("startupProbe", {}).get("httpGet", {}).get("path") == "/healthz"


def t_serve_drain():
    ru = sds["spec"]["updateStrategy"]["rollingUpdate"]
    assert ru.get("maxUnavailable") == 0 and ru.get("maxSurge", 0) >= 1, \
        "rolling updates must start the new pod before the old one drains (maxSurge 1, maxUnavailable 0)"
    pre = serve.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    assert pre[:1] == ["/bin/sleep"], "no preStop wait for the endpoint removal to reach kube-proxy"
    wait = int(pre[1])
    cm = only("ConfigMap", svolumes[smounts[sflag["--policy-dir"]]["name"]]["configMap"]["name"])
    longest = max(json.loads(v).get("limits", {}).get("timeout_ms", 10000) for v in cm["data"].values())
    need = wait + 2 * longest // 1000 + 30   # compile + run of the longest, a margin
    grace = spod.get("terminationGracePeriodSeconds", 30)
    assert grace >= need, "terminationGracePeriodSeconds %d < %d (preStop %d + 2 x %d ms + 30)" % (
        grace, need, wait, longest)
    return "maxSurge 1, preStop %d s, grace %d s >= %d s" % (wait, grace, need)


def t_service():
    svc = only("Service", "sandguard-serve")
    labels = sds["spec"]["template"]["metadata"]["labels"]
    sel = svc["spec"]["selector"]
    assert sel.items() <= labels.items(), "the Service does not select serve's pods"
    assert not sel.items() <= ds["spec"]["template"]["metadata"]["labels"].items(), "the Service selects the agent"
    p = svc["spec"]["ports"][0]
    assert p["targetPort"] in {q["name"] for q in serve["ports"]}, "targetPort names no serve port"
    return "http://%s.%s.svc:%d -> %s" % (svc["metadata"]["name"], svc["metadata"]["namespace"], p["port"],
                                          p["targetPort"])


def t_serve_resources():
    res = serve.get("resources", {})
    lim = quantity(res["limits"]["memory"])
    assert "cpu" not in res.get("limits", {}), "no CPU limit: it would throttle the server, not the sandboxes"
    peak = int(os.environ.get("SG_MEASURED_SERVE_PEAK_KB", 16 * 1024)) * 1024
    buffered = int(sflag.get("--max-buffered", 256 * MIB))
    need = int((peak + buffered) * 1.25)
    assert need <= lim <= 4 * need, "memory limit %d MiB for peak %d MiB + bodies %d MiB (+25%%)" % (
        lim // MIB, peak // MIB, buffered // MIB)
    return "limit %d MiB: peak %.1f MiB RSS + %d MiB of bodies + 25%%" % (lim // MIB, peak / MIB, buffered // MIB)


check_fn("daemonset-node-selection", t_node_selection)
check_fn("daemonset-privileges", t_privileges)
check_fn("daemonset-privileges-documented", t_caps_documented)
check_fn("daemonset-cgroup-init", t_cgroup_init)
check_fn("daemonset-host-mounts", t_host_mounts)
check_fn("daemonset-host-root", t_host_root)
check_fn("daemonset-policies-configmap", t_policies)
check_fn("daemonset-agent-flags", t_args)
check_fn("daemonset-metrics-port", t_metrics)
check_fn("daemonset-probes", t_probes)
check_fn("daemonset-resources", t_resources)
check_fn("podmonitor", t_podmonitor)
check_fn("prometheusrule-metrics", t_rule_metrics)
check_fn("grafana-dashboard", t_dashboard)
check_fn("dockerfile", t_dockerfile)
check_fn("serve-beside-the-agent", t_serve_beside_agent)
check_fn("serve-privileges", t_serve_privileges)
check_fn("serve-flags-tokens-policies", t_serve_flags)
check_fn("serve-probes", t_serve_probes)
check_fn("serve-drain", t_serve_drain)
check_fn("serve-service", t_service)
check_fn("serve-resources", t_serve_resources)
sys.exit(exit_code())
