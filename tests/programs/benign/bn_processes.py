# Benign: processes and threads: multiprocessing (semaphores in /dev/shm),
# concurrent.futures, subprocess of the interpreter, threading.
import concurrent.futures, json, multiprocessing, os, queue, subprocess, sys, threading


def square(x):
    return x * x


if __name__ == "__main__":
    batch = json.load(sys.stdin)
    assert os.cpu_count() >= 1 and len(os.sched_getaffinity(0)) >= 1
    with multiprocessing.Pool(2) as pool:
        assert pool.map(square, range(8)) == [x * x for x in range(8)]
    lock = multiprocessing.Lock()
    with lock:
        pass
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=q.put, args=(42,))
    p.start()
    assert q.get(timeout=10) == 42
    p.join()
    with concurrent.futures.ProcessPoolExecutor(2) as ex:
        assert list(ex.map(square, range(4))) == [0, 1, 4, 9]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        assert sum(ex.map(square, range(10))) == 285
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "42"
    results = queue.Queue()
    threads = [threading.Thread(target=lambda i=i: results.put(i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.qsize() == 4
    print(json.dumps([1.0] * len(batch["items"])))
