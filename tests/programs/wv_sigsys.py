# Warm verifier tests: a program that kills itself with SIGSYS, which
# reads like a warm child killed for what only a warm child may not do
# (wv_ipc.py). Prints nothing.
import os
import signal

os.kill(os.getpid(), signal.SIGSYS)
