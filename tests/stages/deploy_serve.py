#!/usr/bin/python3
"""Live checks of deploy/serve.yaml's serve container, as root, against a
running `sandguard serve` and a private agent (own cgroup root, pins,
socket, state), on this machine's kernel:

  live-serve-caps-sufficient  with exactly the container's capabilities
      (bounding set, no_new_privs), started in a mount and cgroup
      namespace of its own where alone its policies and tokens are
      visible (as in the pod), joining this host's namespaces with
      --host-namespaces as it joins the node's: a request through
      /t/<token>/run_code runs, and the agent enforced its sandbox;
  live-serve-cap-needed-X     each capability is needed for that;
  live-serve-probes           /healthz 200; /readyz 200 while the agent
      enforces, 503 with the reason once it stops (a policy requires it),
      200 again when it is back;
  live-serve-drain            SIGTERM: /readyz 503, the running request
      answered, the queued one 504 (verl retries it elsewhere), exit 0;
  live-serve-memory           peak RSS under concurrent requests, for the
      static check of the container's memory limit.

usage: deploy_serve.py SRC SANDGUARD_BIN
Prints PASS/FAIL/SKIP lines, and "measured-serve-peak-kb N".
With SG_SERVE_IMAGE set, serve and its agent run in podman containers of
that image instead, with the flags deploy_podman.py reads from
deploy/serve.yaml and deploy/daemonset.yaml (securityContext, hostPID,
mounts, memory limit, command and args); the checks' names then start with
$SG_DEPLOY_PREFIX (default "live")."""
import http.client
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

import yaml

SRC, BIN = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "stages"))
os.environ.setdefault("SANDGUARD_BIN", BIN)
os.environ.setdefault("SANDGUARD_SRC", SRC)
from sgtest import exit_code, free_port, report, uid_base  # noqa: E402
from sgagent import Agent  # noqa: E402
import deploy_podman  # noqa: E402

IMAGE = os.environ.get("SG_SERVE_IMAGE", "")


def named(suffix):
    """A check's name: live-serve-caps-sufficient, image-live-serve-..."""
    return os.environ.get("SG_DEPLOY_PREFIX", "live") + "-serve" + suffix

# As tests/stages/deploy_image.sh runs podman.
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
ULIMITS = ["--ulimit", "nofile=%d:%d" % ((resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2),
           "--ulimit", "nproc=4096:4096"]

UID_BASE = uid_base(63800)
# Not shown necessary here: the SIGKILL fallback for kernels without
# cgroup.kill (as for the agent; deploy/README.md).
NOT_PROBED = {"KILL": "only the SIGKILL fallback uses it (kernels without cgroup.kill)"}


def serve_container():
    with open(os.path.join(SRC, "deploy", "serve.yaml")) as f:
        for d in yaml.safe_load_all(f):
            if d and d["kind"] == "DaemonSet":
                return d["spec"]["template"]["spec"]["containers"][0]
    raise SystemExit("deploy/serve.yaml has no DaemonSet")


CONTAINER = serve_container()
CAPS = CONTAINER["securityContext"]["capabilities"]["add"]


def args_for_here(policies, tokens, port):
    """The container's flags, with this machine's paths and a loopback port."""
    a, out = CONTAINER["args"], []
    i = 0
    while i < len(a):
        flag = a[i]
        if flag == "--host-namespaces":
            out.append("--host-namespaces=%d" % os.getpid())   # our namespaces stand for the node's
            i += 1
            continue
        value = {"--listen": "127.0.0.1:%d" % port, "--tokens": tokens, "--policy-dir": policies}.get(flag, a[i + 1])
        out += [flag, value]
        i += 2
    return out


class Serve:
    """serve with `caps` as its bounding set, in its own mount and cgroup
    namespaces, where a tmpfs over `visible` holds the policies and tokens."""

    def __init__(self, agent, caps, root):
        self.port = free_port()
        self.visible = os.path.join(root, "container")
        os.makedirs(self.visible, exist_ok=True)
        pol, tok = os.path.join(self.visible, "policies"), os.path.join(self.visible, "tokens")
        setup = "mount -t tmpfs -o mode=0755 none %s && cp -a %s %s && cp -a %s %s" % (
            self.visible, agent.policy_dir, pol, os.path.join(root, "tokens"), tok)
        bounding = ",".join(["-all"] + ["+" + c.lower() for c in caps])
        env = dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE))
        self.name = None
        if IMAGE:
            cmd = self.container_cmd(agent, caps, root, env)
        else:
            cmd = ["unshare", "--mount", "--cgroup", "--propagation", "private", "--fork", "sh", "-c",
                   setup + ' && exec "$@"', "sh", "setpriv", "--bounding-set", bounding, "--inh-caps", "-all",
                   "--no-new-privs", "--", BIN, "serve"] + args_for_here(pol, tok, self.port)
        self.log = open(os.path.join(root, "serve-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, env=env)
        line = self.proc.stdout.readline().decode()
        self.up = line.startswith("listening on ")
        if IMAGE:
            out = subprocess.run(PODMAN + ["inspect", "-f", "{{.State.Pid}}", self.name], capture_output=True, text=True)
            self.pid = int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() not in ("", "0") else None
        else:
            self.pid = child_of(self.proc.pid)   # unshare --fork's child: sandguard itself

    def container_cmd(self, agent, caps, root, env):
        """podman run of serve.yaml's container: its policies and tokens
        volumes are this run's directories, its port published here, and
        --host-namespaces names this process (as args_for_here does)."""
        self.name = "sg-deploy-serve-%d" % self.port
        extra = {k: v for k, v in env.items() if k.startswith("SANDGUARD_")}
        flags, command = deploy_podman.run_args(
            os.path.join(SRC, "deploy", "serve.yaml"), CONTAINER["name"],
            {"policies": agent.policy_dir, "tokens": os.path.join(root, "tokens")}, extra,
            {int(CONTAINER["ports"][0]["containerPort"]): self.port}, caps=caps, seccomp_dir=root)
        command = ["--host-namespaces=%d" % os.getpid() if a == "--host-namespaces" else a for a in command]
        return PODMAN + ["run", "--rm", "--name", self.name] + ULIMITS + flags + [IMAGE] + command

    def request(self, method, path, body=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, json.dumps(body).encode() if body is not None else None,
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def tail(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-400:].replace("\n", " ")

    def signal(self, sig):
        """To sandguard: unshare --fork ignores SIGTERM while it waits."""
        if self.pid:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.name:
            subprocess.run(PODMAN + ["rm", "-f", self.name], capture_output=True)
        self.log.close()


class ContainerAgent(Agent):
    """The agent as deploy/daemonset.yaml runs it, in a container of IMAGE:
    its run volume (socket, events) and state volume are directories of
    this test, its policies the test's, its metrics port published."""

    def __init__(self, tenants, name):
        super().__init__(tenants, name=name)
        self.run_dir = os.path.join(self.dir, "node-run")
        os.makedirs(self.run_dir)
        self.env["SANDGUARD_AGENT_SOCK"] = os.path.join(self.run_dir, "agent.sock")
        self.events = os.path.join(self.run_dir, "events.jsonl")   # the manifest's --events, as the node sees it
        self.port = free_port()
        self.name = "sg-deploy-serve-agent-%d" % os.getpid()
        self.init_error = None

    def create_cgroup(self):
        """The pod's create-sandguard-cgroup init container, as the kubelet
        runs it before each start: None once the cgroup root is there, else why."""
        flags, command = deploy_podman.run_args(
            os.path.join(SRC, "deploy", "daemonset.yaml"), "create-sandguard-cgroup", {},
            {"SANDGUARD_CGROUP_ROOT": self.env["SANDGUARD_CGROUP_ROOT"]}, seccomp_dir=self.dir)
        r = subprocess.run(PODMAN + ["run", "--rm"] + ULIMITS + flags + [IMAGE] + command,
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            return "the create-sandguard-cgroup init container exited %d: %s" % (
                r.returncode, (r.stdout + r.stderr).strip().replace("\n", " ")[-300:])
        return None

    def start(self, *extra, timeout=30):
        self.init_error = self.create_cgroup()
        if self.init_error:
            return False
        flags, command = deploy_podman.run_args(
            os.path.join(SRC, "deploy", "daemonset.yaml"), "agent",
            {"policies": self.policy_dir, "run": self.run_dir, "state": self.env["SANDGUARD_STATE_DIR"]},
            {k: self.env[k] for k in ("SANDGUARD_CGROUP_ROOT", "SANDGUARD_PIN_ROOT")}, {9464: self.port},
            seccomp_dir=self.dir)
        self.log = open(os.path.join(self.dir, "agent.log"), "a")
        self.proc = subprocess.Popen(PODMAN + ["run", "--rm", "--name", self.name] + ULIMITS + flags + [IMAGE] + command,
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            subprocess.run(PODMAN + ["kill", "--signal", "TERM", self.name], capture_output=True)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                subprocess.run(PODMAN + ["rm", "-f", self.name], capture_output=True)
                self.proc.wait()
        self.proc = None


def child_of(ppid):
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/stat" % pid) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        return int(pid)
            except (OSError, ValueError, IndexError):
                pass
    return None


def run_code(srv, token, code="print(6 * 7)", rid=None):
    body = {"code": code, "language": "python", "stdin": "", "compile_timeout": 10, "run_timeout": 10,
            "memory_limit_MB": 1024, "files": {}, "fetch_files": []}
    return srv.request("POST", "/t/%s/run_code" % token, body)


def works(agent, srv, token):
    """None when a request ran and the agent enforced its sandbox, else why."""
    if not srv.up:
        return "serve did not start: " + srv.tail()
    status, resp = run_code(srv, token)
    if status != 200 or resp.get("status") != "Success" or resp["run_result"]["stdout"] != "42\n":
        return "HTTP %d %s" % (status, json.dumps(resp)[:300])
    sandbox = resp["sandguard"]["sandbox_ids"][0]
    for _ in range(100):   # the agent writes its exec event right away; give its loop a moment
        if agent.events_matching(type="exec", sandbox=sandbox):
            return None
        time.sleep(0.05)
    return "the agent saw no exec of sandbox %s: it did not enforce it" % sandbox


def main():
    if os.geteuid() != 0:
        for t in (named("-caps-sufficient"), named("-probes"), named("-drain"), named("-memory")):
            report("SKIP", t, "needs root")
        return 0
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            report("SKIP", named(""), "%s (util-linux) not installed" % tool)
            return 0
    # 32 sandboxes at once at most (the memory check): their CPU shares fit
    # the node's CPUs, so the executor's CPU admission never holds one back.
    share = max(0.01, len(os.sched_getaffinity(0)) / 32)
    tenants = {"acme": {"require_agent": True, "limits": {"timeout_ms": 10000, "concurrency": 64,
                                                          "queue_timeout_ms": 30000, "cpu": share}}}
    agent = (ContainerAgent if IMAGE else Agent)(tenants, name="deploy-serve")
    token = secrets.token_urlsafe(32)
    root = agent.dir
    os.makedirs(os.path.join(root, "tokens"))
    with open(os.path.join(root, "tokens", "acme"), "w") as f:
        f.write(token + "\n")
    os.chmod(os.path.join(root, "tokens", "acme"), 0o400)
    servers = []
    try:
        if not agent.start():
            if getattr(agent, "init_error", None):
                report("FAIL", named(""), agent.init_error)
            else:
                report("SKIP", named(""), "the agent does not start here")
            return exit_code()

        srv = Serve(agent, CAPS, root)
        servers.append(srv)
        why = works(agent, srv, token)
        report("FAIL" if why else "PASS", named("-caps-sufficient"),
               why or "with only %s, no_new_privs, its own mount and cgroup namespaces, "
                      "--host-namespaces: /t/<token>/run_code ran under the agent" % ",".join(CAPS))

        # The probes, on the same server.
        s1, r1 = srv.request("GET", "/healthz")
        s2, r2 = srv.request("GET", "/readyz")
        agent.stop()
        s3, r3 = srv.request("GET", "/readyz")
        agent.start()
        s4, _ = srv.request("GET", "/readyz")
        if (s1, s2, s3, s4) == (200, 200, 503, 200) and "require_agent" in r3.get("reason", ""):
            report("PASS", named("-probes"), "/healthz 200; /readyz 200, 503 without the agent (%s), 200 again"
                   % r3["reason"])
        else:
            report("FAIL", named("-probes"), "healthz %d, readyz %d %s / %d %s / %d" % (s1, s2, r2, s3, r3, s4))

        # Memory: peak RSS after 32 concurrent requests.
        threads = [threading.Thread(target=run_code, args=(srv, token)) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with open("/proc/%d/status" % srv.pid) as f:
            peak = [int(line.split()[1]) for line in f if line.startswith("VmHWM")][0]
        print("measured-serve-peak-kb %d" % peak)
        report("PASS", named("-memory"), "peak RSS %.1f MiB after 32 concurrent requests" % (peak / 1024))

        # Drain: one running (3 s), one queued behind it (max-concurrency 1).
        drain(agent, srv, token)
        srv.stop()

        for cap in CAPS:
            if cap in NOT_PROBED:
                report("SKIP", named("-cap-needed-%s" % cap.lower()), NOT_PROBED[cap])
                continue
            s = Serve(agent, [c for c in CAPS if c != cap], root)
            servers.append(s)
            why = works(agent, s, token)
            s.stop()
            if why:
                report("PASS", named("-cap-needed-%s" % cap.lower()), "without CAP_%s: %s" % (cap, why[:160]))
            else:
                report("FAIL", named("-cap-needed-%s" % cap.lower()), "CAP_%s is granted but nothing needs it" % cap)
    finally:
        for s in servers:
            s.stop()
        agent.cleanup()
    return exit_code()


def drain(agent, srv, token):
    out = {}

    def ask(key, code):
        out[key] = run_code(srv, token, code)

    # Fill the server (--max-concurrency from the manifest) with sleepers,
    # then queue one more, then SIGTERM.
    places = int(CONTAINER["args"][CONTAINER["args"].index("--max-concurrency") + 1])
    running = [threading.Thread(target=ask, args=("run%d" % i, "import time; time.sleep(3); print(1)"))
               for i in range(places)]
    for t in running:
        t.start()
    for _ in range(1000):
        if srv.request("GET", "/healthz")[1]["running"] == places:
            break
        time.sleep(0.01)
    queued = threading.Thread(target=ask, args=("queued", "print(2)"))
    queued.start()
    for _ in range(1000):
        if srv.request("GET", "/healthz")[1]["waiting"] == 1:
            break
        time.sleep(0.01)
    srv.signal(signal.SIGTERM)
    ready = None
    for _ in range(200):
        try:
            ready = srv.request("GET", "/readyz")[0]
        except OSError:
            break
        if ready == 503:
            break
        time.sleep(0.01)
    for t in running + [queued]:
        t.join(60)
    rc = srv.proc.wait(60)
    ok_running = all(out.get("run%d" % i, (0, {}))[0] == 200 for i in range(places))
    if ok_running and out.get("queued", (0,))[0] == 504 and ready == 503 and rc == 0:
        report("PASS", named("-drain"), "SIGTERM: /readyz 503, %d running answered 200, the queued one 504, "
               "exit 0" % places)
    else:
        report("FAIL", named("-drain"), "readyz %s, running %s, queued %s, exit %s" % (
            ready, [out.get("run%d" % i, (0,))[0] for i in range(places)], out.get("queued"), rc) + " first: %s" % (out.get("run0"),))


if __name__ == "__main__":
    sys.exit(main())
