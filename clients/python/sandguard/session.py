"""Environments' sessions on a `sandguard serve` (docs/environments.md),
with the standard library only.

    from sandguard.session import Session
    s = Session("http://reward-node:8080", token="...", kernel="python",
                files={"calc.py": "def add(a, b): return a - b\\n"})
    s.run("python3 -m pytest -q")          # a command, sh -c
    s.code("x = 41")                       # code for the session's kernel
    s.write("calc.py", "...")              # files in ...
    s.read("out.txt")                      # ... and out (bytes)
    forks = s.fork(8)                      # 8 sessions from this state
    s.close()

Every call returns the server's JSON; a refusal raises SessionError with
the HTTP status, the server's reason and Retry-After. Two adapters give
agent frameworks the shapes they call: SessionCodeTool (rLLM's
CodeTool.forward(code, timeout)) and SessionEnv (reset / step).
"""
import base64
import json
import urllib.error
import urllib.request


class SessionError(Exception):
    def __init__(self, status, reason, retry_after=None):
        super().__init__("HTTP %d: %s" % (status, reason))
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


def _post(url, path, body, tenant=None, token=None, run_id=None, timeout=600):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if tenant:
        headers["X-Sandguard-Tenant"] = tenant
    if run_id:
        headers["X-Sandguard-Run-Id"] = run_id
    req = urllib.request.Request(url.rstrip("/") + path, json.dumps(body).encode(), headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            reason = json.loads(raw).get("error", raw.decode(errors="replace"))
        except ValueError:
            reason = raw.decode(errors="replace")
        ra = e.headers.get("Retry-After")
        raise SessionError(e.code, reason, int(ra) if ra and ra.isdigit() else None) from None


class Session:
    """One session: made by the constructor, or attached to by id."""

    def __init__(self, url, tenant=None, token=None, run_id=None, kernel=None, files=None,
                 setup=None, _id=None):
        self.url, self.tenant, self.token, self.run_id = url, tenant, token, run_id
        self.setup = None
        if _id:
            self.id = _id
            return
        body = {}
        if kernel:
            body["kernel"] = kernel
        if files:
            body["files"], body["encoding"] = _encode(files), "base64"
        if setup:
            body["setup"] = setup
        made = self._post("/v1/sessions", body)
        self.id = made["session"]
        self.setup = made.get("setup")

    @classmethod
    def attach(cls, url, session_id, tenant=None, token=None, run_id=None):
        return cls(url, tenant=tenant, token=token, run_id=run_id, _id=session_id)

    @staticmethod
    def list(url, tenant=None, token=None, run_id=None):
        return _post(url, "/v1/sessions/list", {}, tenant, token, run_id)["sessions"]

    def _post(self, path, body, timeout=600):
        return _post(self.url, path, body, self.tenant, self.token, self.run_id, timeout)

    def _call(self, name, body):
        return self._post("/v1/sessions/%s/%s" % (self.id, name), body)

    def run(self, command, stdin=None, timeout_ms=None):
        """A command (sh -c) in the session: status, exit_code, stdout, stderr, cause, ..."""
        return self._call("exec", _step({"command": command}, stdin, timeout_ms))

    def exec_argv(self, argv, stdin=None, timeout_ms=None):
        return self._call("exec", _step({"argv": list(argv)}, stdin, timeout_ms))

    def code(self, code, stdin=None, timeout_ms=None):
        """Code for the session's kernel (python or bash), its state kept."""
        return self._call("exec", _step({"code": code}, stdin, timeout_ms))

    def write(self, path, content):
        return self._call("put", {"files": _encode({path: content}), "encoding": "base64"})

    def read(self, path):
        """The file's bytes, or None when it is not there."""
        got = self._call("get", {"paths": [path]})["files"][path]
        return None if got is None else base64.b64decode(got)

    def fork(self, n=1):
        ids = self._call("fork", {"n": n})["forks"]
        return [Session.attach(self.url, i, self.tenant, self.token, self.run_id) for i in ids]

    def info(self):
        for s in Session.list(self.url, self.tenant, self.token, self.run_id):
            if s["session"] == self.id:
                return s
        return None

    def close(self):
        try:
            self._call("close", {})
        except SessionError as e:
            if e.status not in (404, 410):
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _step(body, stdin, timeout_ms):
    if stdin is not None:
        body["stdin"] = stdin
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    return body


def _encode(files):
    return {p: base64.b64encode(c.encode() if isinstance(c, str) else c).decode()
            for p, c in files.items()}


class CodeToolOutput:
    """The shape of rLLM's CodeToolOutput: stdout, stderr, output, error."""

    def __init__(self, name, stdout=None, stderr=None, output=None, error=None):
        self.name, self.stdout, self.stderr, self.output, self.error = name, stdout, stderr, output, error

    def __repr__(self):
        return "CodeToolOutput(%r)" % self.__dict__


class SessionCodeTool:
    """rLLM's CodeTool.forward(code, timeout) on a session's Python kernel:
    state is kept from call to call, as in a code interpreter."""

    name = "sandguard_session"

    def __init__(self, url, **session_args):
        session_args.setdefault("kernel", "python")
        self.session = Session(url, **session_args)

    def forward(self, code, timeout=12, **kwargs):
        r = self.session.code(code, timeout_ms=int(timeout * 1000))
        error = None
        if r["status"] != "ok":
            error = r["stderr"] or r.get("detail") or r["status"]
        return CodeToolOutput(self.name, stdout=r["stdout"], stderr=r["stderr"],
                              output=r["stdout"], error=error)

    def close(self):
        self.session.close()


class SessionEnv:
    """A reset / step environment over a session: an action is a shell
    command; the observation is its output; `reward_fn(session)` (run
    after every step) gives the reward and whether the episode is done."""

    def __init__(self, url, reward_fn, files=None, max_steps=20, **session_args):
        self.url, self.reward_fn, self.files, self.max_steps = url, reward_fn, files, max_steps
        self.session_args, self.session, self.steps = session_args, None, 0

    def reset(self):
        if self.session:
            self.session.close()
        self.session = Session(self.url, files=self.files, **self.session_args)
        self.steps = 0
        return {"session": self.session.id}, {}

    def step(self, action):
        r = self.session.run(action)
        self.steps += 1
        reward, done = self.reward_fn(self.session)
        done = done or r["session_ended"] or self.steps >= self.max_steps
        obs = {"stdout": r["stdout"], "stderr": r["stderr"], "exit_code": r["exit_code"],
               "status": r["status"]}
        return obs, reward, done, {"step": r}

    def close(self):
        if self.session:
            self.session.close()
