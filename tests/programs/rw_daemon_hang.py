# Leave a daemonized grandchild (double fork, setsid), then hang: an attempt
# still in flight when its executor is killed.
import os, sys, time
sys.stdin.read()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)
os.wait()
open("ready", "w").close()
time.sleep(3600)
