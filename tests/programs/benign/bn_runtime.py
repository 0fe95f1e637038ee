# Benign: what the interpreter and its libraries look up: locale, time
# zone, ssl's default certificates, platform, host name, randomness,
# limits, logging, asyncio.
import asyncio, json, locale, logging, os, platform, resource, secrets, signal, socket, ssl, sys
import sysconfig, time, uuid

batch = json.load(sys.stdin)
locale.setlocale(locale.LC_ALL, "")
assert locale.getpreferredencoding()
assert time.tzname and time.localtime()
ctx = ssl.create_default_context()
assert ctx.cert_store_stats()["x509_ca"] > 0, "no CA certificates from the default paths"
assert ssl.get_default_verify_paths()
# (Not platform.uname() as a whole: its processor field runs `uname -p`,
# a program no default exec.allow names.)
assert platform.python_version() and platform.machine() and platform.system()
assert socket.gethostname()
assert len(secrets.token_hex(16)) == 32 and len(os.urandom(8)) == 8 and uuid.uuid4()
assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 0
assert sysconfig.get_paths()["stdlib"]
signal.signal(signal.SIGUSR1, lambda *a: None)
os.kill(os.getpid(), signal.SIGUSR1)
logging.basicConfig(filename="run.log", level=logging.INFO)
logging.getLogger("benign").info("scored %d items", len(batch["items"]))


async def main():
    r, w = await asyncio.open_connection(sock=socket.socketpair()[0])
    w.close()
    await asyncio.sleep(0.01)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    return await proc.wait()

assert asyncio.run(main()) == 0
print(json.dumps([1.0] * len(batch["items"])))
