#!/usr/bin/python3
"""A container of deploy/*.yaml as `podman run` flags, read from the
manifest itself so that the deploy stage runs the agent and serve with
exactly the securityContext (and pod namespaces, mounts, memory limit,
command and args) the manifests declare.

usage: deploy_podman.py MANIFEST CONTAINER [VOLUME=HOSTDIR | -e NAME=VALUE
                        | -p CONTAINERPORT=HOSTPORT | --node NAME
                        | --caps A,B | --seccomp-dir DIR]...
Prints the flags between `podman run` and the image, then "--", then the
image's command: each argument ended by a NUL byte (a script in a manifest
spans lines). VOLUME=HOSTDIR puts a
directory of this machine where the manifest has a volume (a ConfigMap,
a Secret, or a hostPath moved to a private test root); -e adds an
environment variable (the tests' private roots); -p publishes a container
port on 127.0.0.1; --caps replaces the added capabilities (the checks
that each one is needed); --seccomp-dir is where RuntimeDefault's profile
is written (runtime_default_seccomp). A securityContext field this file does not know is an
error (exit 2), so a new field in a manifest cannot go unapplied."""
import json
import os
import re
import sys
import tempfile

import yaml

# Kubernetes' mountPropagation -> the bind mount's propagation.
PROPAGATION = {None: "rprivate", "None": "rprivate", "HostToContainer": "rslave", "Bidirectional": "rshared"}
MIB = 1024 * 1024
PODMAN_SECCOMP = "/usr/share/containers/seccomp.json"
# Allowed by the runtime default profiles of containerd (what kubelets run)
# and Docker with the capability that guards them since Linux 5.8; Debian
# 12's podman profile still allows them only with CAP_SYS_ADMIN.
GATED_SYSCALLS = {"bpf": "CAP_BPF", "perf_event_open": "CAP_PERFMON"}


class ManifestError(Exception):
    pass


def find_container(manifest, name):
    """(pod spec, container) of the workload in `manifest` that runs `name`."""
    with open(manifest) as f:
        for d in yaml.safe_load_all(f):
            if d and d.get("kind") in ("DaemonSet", "Deployment", "StatefulSet"):
                pod = d["spec"]["template"]["spec"]
                for c in pod.get("containers", []) + pod.get("initContainers", []):
                    if c["name"] == name:
                        return pod, c
    raise ManifestError("%s: no container named %s" % (manifest, name))


def runtime_default_seccomp(directory):
    """RuntimeDefault as a kubelet's runtime has it: podman's own profile,
    with bpf and perf_event_open also allowed by CAP_BPF and CAP_PERFMON.
    Returns the profile's path."""
    with open(PODMAN_SECCOMP) as f:
        profile = json.load(f)
    rules = []
    for rule in profile["syscalls"]:
        names = [n for n in rule["names"] if n not in GATED_SYSCALLS]
        if names:
            rules.append(dict(rule, names=names))
    for name, cap in sorted(GATED_SYSCALLS.items()):
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}})
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "includes": {"caps": [cap]}})
        rules.append({"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                      "excludes": {"caps": ["CAP_SYS_ADMIN", cap]}})
    profile["syscalls"] = rules
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(profile, f)
    path = os.path.join(directory, "runtime-default-seccomp.json")
    os.rename(tmp, path)
    return path


def security_flags(ctx, caps_add=None, seccomp_dir=None):
    """The securityContext as podman flags; every field is handled or refused.
    caps_add replaces capabilities.add (a test's variation)."""
    out, ctx = [], dict(ctx)
    if ctx.pop("privileged", False):
        out.append("--privileged")
    uid, gid = ctx.pop("runAsUser", None), ctx.pop("runAsGroup", None)
    if ctx.pop("runAsNonRoot", False) and uid in (None, 0):
        raise ManifestError("runAsNonRoot with runAsUser %s: the kubelet refuses to start it" % uid)
    if uid is not None:
        out.append("--user=%d%s" % (uid, "" if gid is None else ":%d" % gid))
    if ctx.pop("allowPrivilegeEscalation", True) is False:
        out.append("--security-opt=no-new-privileges")
    if ctx.pop("readOnlyRootFilesystem", False):
        # No tmpfs of podman's own on /tmp, /run, /var/tmp: the kubelet adds none.
        out += ["--read-only", "--read-only-tmpfs=false"]
    caps = ctx.pop("capabilities", {})
    for c in caps.get("drop", []):
        out.append("--cap-drop=%s" % c.lower())
    for c in caps.get("add", []) if caps_add is None else caps_add:
        out.append("--cap-add=CAP_%s" % c.upper())
    if set(caps) - {"add", "drop"}:
        raise ManifestError("capabilities fields %s" % sorted(set(caps) - {"add", "drop"}))
    for field, opt in (("seccompProfile", "seccomp"), ("appArmorProfile", "apparmor")):
        kind = ctx.pop(field, {"type": "RuntimeDefault"}).get("type")
        if kind == "Unconfined":
            out.append("--security-opt=%s=unconfined" % opt)
        elif kind == "RuntimeDefault" and opt == "seccomp":
            out.append("--security-opt=seccomp=%s" % runtime_default_seccomp(seccomp_dir or tempfile.gettempdir()))
        elif kind != "RuntimeDefault":   # AppArmor: podman's default is the runtime's default
            raise ManifestError("%s type %s" % (field, kind))
    for key, value in ctx.pop("seLinuxOptions", {}).items():
        out.append("--security-opt=label=%s:%s" % (key, value))
    if ctx:
        raise ManifestError("securityContext fields this test cannot apply: %s" % sorted(ctx))
    return out


def memory_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    if not m:
        raise ManifestError("memory quantity %s" % q)
    return int(m.group(1)) * {None: 1, "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}[m.group(2)]


def mount_flags(pod, container, host_dirs):
    """Each volumeMount as a bind mount of the volume's host directory, or of
    the directory the test gives for it."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    out = []
    for m in container.get("volumeMounts", []):
        if "subPath" in m:
            raise ManifestError("subPath mount %s" % m["name"])
        vol = volumes[m["name"]]
        src = host_dirs.get(m["name"]) or vol.get("hostPath", {}).get("path")
        if not src:
            raise ManifestError("volume %s is not a hostPath: give its directory (%s=DIR)" % (m["name"], m["name"]))
        if vol.get("hostPath", {}).get("type") == "DirectoryOrCreate":
            os.makedirs(src, exist_ok=True)
        opts = ["ro" if m.get("readOnly") else "rw", PROPAGATION[m.get("mountPropagation")]]
        out.append("--volume=%s:%s:%s" % (src, m["mountPath"], ",".join(opts)))
    return out


def expand(arg, env):
    """The kubelet's $(VAR) expansion in command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def run_args(manifest, name, host_dirs=None, env=None, ports=None, node="deploy-stage", caps=None,
             seccomp_dir=None):
    """(podman run flags, command after the image) for container `name`."""
    pod, c = find_container(manifest, name)
    if "securityContext" in pod:
        raise ManifestError("a pod-level securityContext: this test applies the containers' only")
    # A cgroup namespace of its own, as containerd gives every container on
    # the cgroup v2 nodes the manifests require (podman shares the host's
    # on cgroup v1 and hybrid hosts).
    out = ["--cgroupns=private"]
    for field, flag in (("hostPID", "--pid=host"), ("hostNetwork", "--network=host"), ("hostIPC", "--ipc=host")):
        if pod.get(field):
            out.append(flag)
    out += security_flags(c.get("securityContext", {}), caps, seccomp_dir)
    limit = c.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        out.append("--memory=%d" % memory_bytes(limit))
    out += mount_flags(pod, c, host_dirs or {})
    cenv = {}
    for e in c.get("env", []):
        if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            cenv[e["name"]] = node
        elif "value" in e:
            cenv[e["name"]] = e["value"]
        else:
            raise ManifestError("env %s: only values and spec.nodeName are supported" % e["name"])
    cenv.update(env or {})
    out += ["--env=%s=%s" % kv for kv in sorted(cenv.items())]
    for container_port, host_port in (ports or {}).items():
        if pod.get("hostNetwork"):
            continue
        out.append("--publish=127.0.0.1:%d:%d" % (host_port, container_port))
    command = [expand(a, cenv) for a in c.get("command", [])]
    if command:
        out.append("--entrypoint=" + command[0])
    return out, command[1:] + [expand(a, cenv) for a in c.get("args", [])]


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    host_dirs, env, ports, node, caps, seccomp_dir = {}, {}, {}, "deploy-stage", None, None
    rest = iter(argv[3:])
    for a in rest:
        if a == "-e":
            k, _, v = next(rest).partition("=")
            env[k] = v
        elif a == "-p":
            k, _, v = next(rest).partition("=")
            ports[int(k)] = int(v)
        elif a == "--node":
            node = next(rest)
        elif a == "--caps":
            caps = [c for c in next(rest).split(",") if c]
        elif a == "--seccomp-dir":
            seccomp_dir = next(rest)
        elif "=" in a:
            k, _, v = a.partition("=")
            host_dirs[k] = v
        else:
            sys.stderr.write("deploy_podman.py: unknown argument %s\n" % a)
            return 2
    try:
        flags, command = run_args(argv[1], argv[2], host_dirs, env, ports, node, caps, seccomp_dir)
    except (ManifestError, OSError, KeyError, StopIteration) as e:
        sys.stderr.write("deploy_podman.py: %s\n" % e)
        return 2
    sys.stdout.write("".join(a + "\0" for a in flags + ["--"] + command))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
