#!/usr/bin/env python3
"""split.py RUNS NAME=CMD ... -- the cost split of bench/agent.sh: runs the
commands round-robin, RUNS rounds (so a change of the machine's speed
during the measurement hits every configuration alike, which running each
one RUNS times in a row does not), and prints a Markdown row per command:
median and minimum CPU time (user + system of all its processes), the
median of its per-round ratios to the first command (the same round: this
VM's speed modes change within a run), and minimum over minimum. Output
goes to /dev/null; trace files the agent writes in the working directory
are deleted after each run."""
import glob, os, resource, statistics, subprocess, sys


def cpu_of(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for f in glob.glob("heaptrail.*.ht"):
        os.unlink(f)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    runs = int(sys.argv[1])
    cfgs = [a.split("=", 1) for a in sys.argv[2:]]
    cpu = {name: [] for name, _ in cfgs}
    for _ in range(runs):
        for name, cmd in cfgs:
            cpu[name].append(cpu_of(cmd))
    base = cpu[cfgs[0][0]]
    for name, _ in cfgs:
        med, low = statistics.median(cpu[name]), min(cpu[name])
        paired = statistics.median(x / max(b, 0.001) for x, b in zip(cpu[name], base))
        print("| %s | %.3f | %.2fx | %.3f | %.2fx |" % (name, med, paired, low, low / min(base)))


main()
