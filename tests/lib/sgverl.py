"""A client that behaves exactly like verl's SandboxFusion client
(verl/utils/reward_score/sandbox_fusion/utils.py, call_sandbox_api and
_process_single_case), with the standard library instead of `requests`:

  - one POST per test to the URL it is given, headers Content-Type and
    Accept only, the body {compile_timeout, run_timeout, code, stdin,
    memory_limit_MB, language, files: {}, fetch_files: []};
  - a timeout of compile_timeout + run_timeout + 10 s (API_TIMEOUT) for
    connecting and for reading, as requests' timeout=;
  - up to three tries (MAX_RETRIES), retrying only on 504, after a linear
    backoff of 1 s, then 2 s (INITIAL_RETRY_DELAY * (attempt + 1));
  - any other non-2xx, a timeout, a refused connection or a bad JSON body
    ends it as an API error, which verl scores -1, as it does when the
    three tries all got 504.

call() returns a Result with verl's score and everything the tests check:
every HTTP status seen, and how it ended."""
import http.client
import json
import socket
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgserve import verl_verdict  # noqa: E402

API_TIMEOUT = 10
MAX_RETRIES = 3
INITIAL_RETRY_DELAY = 1


class Result:
    def __init__(self):
        self.statuses = []   # HTTP status of each try
        self.error = None    # "read timeout", "HTTP 429", "504 x3", ...: an API error
        self.response = None
        self.score = None    # verl's: True/False, -1 api/sandbox error, -2 runtime, -3 timeout, -4 compile
        self.seconds = 0.0


def payload(code, stdin, compile_timeout, run_timeout, memory_limit_mb, language):
    return json.dumps({"compile_timeout": compile_timeout, "run_timeout": run_timeout, "code": code,
                       "stdin": stdin, "memory_limit_MB": memory_limit_mb, "language": language,
                       "files": {}, "fetch_files": []}).encode()


def post(url, body, timeout):
    """(status, parsed body or None); raises socket.timeout / OSError."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        c.request("POST", u.path, body, {"Content-Type": "application/json", "Accept": "application/json"})
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, None
    finally:
        c.close()


def call(url, code, stdin="", timeout=10, memory_limit_mb=1024, language="python", expected=None):
    """One test case, as _process_single_case: compile and run timeouts are
    both `timeout`."""
    res = Result()
    body = payload(code, stdin, timeout, timeout, memory_limit_mb, language)
    request_timeout = timeout + timeout + API_TIMEOUT
    t0 = time.monotonic()
    for attempt in range(MAX_RETRIES):
        try:
            status, resp = post(url, body, request_timeout)
        except socket.timeout:
            res.error = "read timeout"
            break
        except OSError as e:
            res.error = "connection error: %r" % e
            break
        res.statuses.append(status)
        if status == 504:
            res.error = "504 x%d" % (attempt + 1)
            if attempt < MAX_RETRIES - 1:
                time.sleep(INITIAL_RETRY_DELAY * (attempt + 1))
            continue
        if not 200 <= status < 300:
            res.error = "HTTP %d" % status
            break
        if resp is None:
            res.error = "bad JSON"
            break
        res.error = None
        res.response = resp
        break
    res.seconds = time.monotonic() - t0
    res.score = -1 if res.error else verl_verdict(res.response, expected)
    return res
