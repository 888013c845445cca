#!/usr/bin/env python3
"""measure.py WORKLOAD -- NAME RUNS CMD... [:: NAME RUNS CMD...]... -- one
workload's tools, side by side, for bench/agent.sh. The first command is
the uninstrumented program and must have the most runs. The commands run
round-robin: round r runs every command that has more than r runs, one
after another, starting with a different one each round. So a change of
this VM's speed while the workload is measured (its two speed modes
differ by up to 1.7x and last seconds to minutes) hits every tool alike,
and each tool's ratio is the median over its rounds of its time divided
by the uninstrumented program's in the same round. (Before, each tool ran
all its runs in a row: sqlite3 under heaptrail read 1.20x-1.27x across
runs of the script, and 1.18x-1.19x paired.)

Prints one Markdown row per command (agent.sh's table): workload, name,
median wall time (s) and its paired ratio, median CPU time (user + system
of all processes of the run) and its paired ratio, median peak RSS (MiB;
the largest process of the run's tree, as GNU time reports it from wait4,
so this Python process's own memory is not counted) and its ratio to the
uninstrumented program's, and the exit status of its last run. Output of
the commands goes to /dev/null; heaptrail traces left in the working
directory are deleted after each run."""
import glob, os, statistics, subprocess, sys, tempfile, time


def once(cmd, out):
    t0 = time.monotonic()
    subprocess.run(["/usr/bin/time", "-f", "%U %S %M %x", "-o", out] + cmd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    with open(out) as f:
        text = f.read()
    words = text.split()
    status = int(words[-1])
    if "terminated by signal" in text:     # GNU time: "Command terminated by signal N"
        status = -int(text.split("terminated by signal")[1].split()[0])
    for t in glob.glob("heaptrail.*.ht"):
        os.unlink(t)
    return wall, int(words[-2]), float(words[-4]) + float(words[-3]), status


def parse(args):
    tools, cur = [], []
    for a in args + ["::"]:
        if a != "::":
            cur.append(a)
            continue
        if len(cur) < 3:
            sys.exit("measure.py: want NAME RUNS CMD... between '::'")
        tools.append({"name": cur[0], "runs": int(cur[1]), "cmd": cur[2:],
                      "wall": [], "rss": [], "cpu": [], "status": 0})
        cur = []
    if any(t["runs"] > tools[0]["runs"] for t in tools):
        sys.exit("measure.py: the first command needs the most runs")
    return tools


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    workload = sys.argv[1]
    tools = parse(sys.argv[3:])
    fd, out = tempfile.mkstemp()
    os.close(fd)
    base = tools[0]
    for r in range(base["runs"]):
        now = [t for t in tools if t["runs"] > r]
        k = r % len(now)
        for t in now[k:] + now[:k]:
            wall, rss, cpu, status = once(t["cmd"], out)
            t["wall"].append((r, wall))
            t["rss"].append(rss)
            t["cpu"].append((r, cpu))
            t["status"] = status
    os.unlink(out)

    def paired(t, key):
        b = dict(base[key])
        return statistics.median(v / max(b[r], 0.001) for r, v in t[key])

    base_rss = statistics.median(base["rss"])
    for t in tools:
        rss = statistics.median(t["rss"])
        print("| %s | %s | %.4f | %.2fx | %.3f | %.2fx | %.1f | %.2fx | %d |" % (
            workload, t["name"], statistics.median(v for _, v in t["wall"]), paired(t, "wall"),
            statistics.median(v for _, v in t["cpu"]), paired(t, "cpu"), rss / 1024, rss / base_rss,
            t["status"]), flush=True)


main()
