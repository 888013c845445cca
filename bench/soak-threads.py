# soak-threads.py -- part of `make soak` (bench/soak.sh): eight Python
# threads that sleep and wait with timeouts every 0.5-10 ms (producers
# and consumers around a queue) for 5 seconds, so leak checks meet
# threads waking all the time. Prints one line; keeps at most 1000
# strings per consumer, everything reachable.
import json
import queue
import threading
import time

q = queue.Queue()
stop = time.time() + 5


def producer():
    i = 0
    while time.time() < stop:
        q.put({"i": i, "s": "x" * (i % 100)})
        i += 1
        time.sleep(0.0005)


def consumer(out):
    while time.time() < stop:
        try:
            out.append(json.dumps(q.get(timeout=0.01)))
            if len(out) > 1000:
                del out[:500]
        except queue.Empty:
            pass


outs = [[] for _ in range(6)]
threads = [threading.Thread(target=producer) for _ in range(2)]
threads += [threading.Thread(target=consumer, args=(o,)) for o in outs]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads ok")
