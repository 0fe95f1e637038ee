"""Shared by the tests that run Debian's Prometheus (50-prometheus,
52-alerts-live)."""
import subprocess


def stop(proc):
    """End a Prometheus server started by the test (None: nothing)."""
    if not proc:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
