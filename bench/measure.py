#!/usr/bin/env python3
"""measure.py RUNS -- CMD...: runs CMD RUNS times; prints the median wall
time in seconds, the median peak RSS in KiB (the largest process of the
run's tree, as GNU time reports it from wait4: through /usr/bin/time, so
this Python process's own memory before exec is not counted), and the
exit status of the last run, and the median CPU time (user + system, all
processes of the run; less disturbed than wall time when other jobs share
the cores) and the minimum CPU time. Output goes to /dev/null. Used by
bench/agent.sh."""
import os, statistics, subprocess, sys, tempfile, time

def main():
    runs = int(sys.argv[1])
    cmd = sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:]
    walls, rss, cpus = [], [], []
    status = 0
    fd, out = tempfile.mkstemp()
    os.close(fd)
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M %x", "-o", out] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.monotonic() - t0)
        with open(out) as f:
            text = f.read()
        words = text.split()
        rss.append(int(words[-2]))
        cpus.append(float(words[-4]) + float(words[-3]))
        status = int(words[-1])
        if "terminated by signal" in text:     # GNU time: "Command terminated by signal N"
            status = -int(text.split("terminated by signal")[1].split()[0])
    os.unlink(out)
    print("%.4f %d %d %.3f %.3f" % (statistics.median(walls), statistics.median(rss), status,
                                  statistics.median(cpus), min(cpus)))

main()
