"""rLLM's CodeTool over `sandguard serve`, with the standard library only.

rLLM (rllm/tools/code_tools/code_tool.py) runs reward code through a
CodeTool: forward(code, timeout) returns a CodeToolOutput whose `error` is
set when the program failed, and its reward (rllm/rewards/code_reward.py,
codetool_check_correctness) counts a program correct iff `error` is not
set. SandguardCodeTool is such a tool: it posts the code to the server's
/tci/execute (the request and reply of Together's code interpreter, which
rLLM's TogetherCodeTool uses) and reads the reply as TogetherCodeTool
does.

One difference on purpose: a platform fault (the node could not run the
program: HTTP 500, or 429/503/504 after the retries) raises
SandguardUnavailable instead of coming back as `error`, which rLLM would
score as a wrong program. Everything else the program did, a timeout
and a policy violation included, is its verdict: `error` is set.

    from sandguard.rllm import SandguardCodeTool
    tool = SandguardCodeTool("http://sandguard-serve.sandguard.svc", token)
    out = tool(code="print(6 * 7)", timeout=12)   # out.stdout == "42", out.error is None

This module does not import rllm: CodeToolOutput mirrors rLLM's fields
(name, output, error, metadata, stdout, stderr). To put the tool in rLLM,
see docs/trainer-integration.md, "rLLM"."""
import dataclasses
import json
import os
import time
import urllib.error
import urllib.request

RETRIED = (429, 503, 504)  # "not now": the caps, the queue, the node's CPU
SLACK_S = 15               # what the reply may take beyond the run's own timeout


@dataclasses.dataclass
class CodeToolOutput:
    """rLLM's CodeToolOutput (ToolOutput plus stdout and stderr)."""
    name: str
    output: object = None
    error: str = None
    metadata: dict = None
    stdout: str = None
    stderr: str = None

    def to_string(self):
        """As rLLM's: the output, else stdout, else stderr, else ""."""
        if self.output is not None:
            return str(self.output)
        return str(self.stdout or self.stderr or "")

    def to_dict(self):
        return {"name": self.name, "output": self.output, "error": self.error, "metadata": self.metadata}

    def __str__(self):
        if self.error:
            return "Error: %s" % self.error
        return "" if self.output is None else str(self.output)


class SandguardUnavailable(RuntimeError):
    """The node could not run the program: not the program's fault."""


class SandguardCodeTool:
    """A CodeTool (rLLM's interface) that runs each call in a fresh
    sandguard sandbox, booked to the token's tenant.

    url: the server (SANDGUARD_URL); token: the tenant's token
    (SANDGUARD_TOKEN; none for a loopback server without --tokens);
    tries: attempts on a "not now" answer, each after its Retry-After."""

    def __init__(self, url=None, token=None, name="sandguard_python",
                 description="Execute Python code in a sandguard sandbox.", n_sandboxes=1, tries=3,
                 run_id=None):
        self.url = (url or os.environ.get("SANDGUARD_URL") or "").rstrip("/")
        if not self.url:
            raise ValueError("SandguardCodeTool needs the server's URL (or SANDGUARD_URL)")
        self.token = token if token is not None else os.environ.get("SANDGUARD_TOKEN")
        self.name = name
        self.description = description
        self.n_sandboxes = n_sandboxes
        self.tries = tries
        self.run_id = run_id

    @property
    def json(self):
        """The tool's description for a model, as rLLM's CodeTool gives it."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": {
                "code": {"type": "string", "description": "Python code to execute in the sandbox environment."},
                "timeout": {"type": "integer", "description": "Maximum execution time in seconds before timing out",
                            "default": 12}},
                "required": ["code"]}}}

    def __call__(self, *args, **kwargs):
        kwargs.pop("use_async", None)
        return self.forward(*args, **kwargs)

    def forward(self, code, timeout=12, **kwargs):
        """Run `code` (Python) once, for at most `timeout` seconds (the
        tenant's policy may set less). Returns a CodeToolOutput; raises
        SandguardUnavailable on a platform fault, ValueError on a request
        the server refused (4xx: the message says why)."""
        timeout = timeout or 12
        body = {"code": code, "language": "python", "timeout": timeout}
        if kwargs.get("files"):
            body["files"] = kwargs["files"]
        reply = self._post(body, timeout)
        return self._read(reply)

    def _post(self, body, timeout):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if self.run_id:
            headers["X-Sandguard-Run-Id"] = self.run_id
        data = json.dumps(body).encode()
        why = ""
        for attempt in range(self.tries):
            req = urllib.request.Request(self.url + "/tci/execute", data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=timeout + SLACK_S) as r:
                    return json.load(r)
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")
                try:
                    why = json.loads(text).get("error") or text
                except ValueError:
                    why = text
                if e.code in RETRIED and attempt + 1 < self.tries:
                    time.sleep(min(int(e.headers.get("Retry-After") or 1), 60))
                    continue
                if 400 <= e.code < 500 and e.code not in RETRIED:
                    raise ValueError("sandguard refused the request (HTTP %d): %s" % (e.code, why)) from None
                raise SandguardUnavailable("HTTP %d: %s" % (e.code, why)) from None
            except (urllib.error.URLError, OSError) as e:
                raise SandguardUnavailable("cannot reach %s: %s" % (self.url, e)) from None
        raise SandguardUnavailable(why)

    def _read(self, reply):
        """The outputs joined as TogetherCodeTool joins them."""
        stdout = stderr = output = ""
        error = None
        for item in reply["data"]["outputs"]:
            if item["type"] == "stdout":
                stdout += item["data"] + "\n"
            elif item["type"] == "stderr":
                stderr += item["data"] + "\n"
            elif item["type"] == "error":
                error = item["data"]
                stderr += item["data"] + "\n"
            else:
                output += str(item["data"]) + "\n"
        return CodeToolOutput(name=self.name, output=output.strip() or None, stdout=stdout.strip() or None,
                              stderr=stderr.strip() or None, error=error,
                              metadata={"sandguard": reply.get("sandguard")})

    # rLLM's sandbox hooks: every call has a fresh sandbox of its own.
    def _init_sandbox(self):
        pass

    def _kill_sandbox(self):
        pass

    def _restart_sandbox(self):
        pass
