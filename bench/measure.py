#!/usr/bin/env python3
"""measure.py RUNS -- CMD...: runs CMD RUNS times; prints the median wall
time in seconds, the median peak RSS in KiB (the largest process of the
run's tree, as GNU time reports it from wait4: through /usr/bin/time, so
this Python process's own memory before exec is not counted), and the
exit status of the last run. Output goes to /dev/null. Used by
bench/agent.sh."""
import os, statistics, subprocess, sys, tempfile, time

def main():
    runs = int(sys.argv[1])
    cmd = sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:]
    walls, rss = [], []
    status = 0
    fd, out = tempfile.mkstemp()
    os.close(fd)
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.run(["/usr/bin/time", "-q", "-f", "%M %x", "-o", out] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.monotonic() - t0)
        with open(out) as f:
            words = f.read().split()
        rss.append(int(words[-2]))
        status = int(words[-1])
    os.unlink(out)
    print("%.4f %d %d" % (statistics.median(walls), statistics.median(rss), status))

main()
