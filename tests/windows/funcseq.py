#!/usr/bin/env python3
"""funcseq.py WIN_SYMBOLS LINUX_SYMBOLS -- compares the function sequences
of the same chain program captured on Windows and on Linux.

Each file is the output of `chains symbols`: for every capture point a
"CAPTURE label" line, "FRAME module offset" lines (offset = return address
minus the module's load address) and "END". Frames are symbolized offline
with nm: the function containing offset - 1 (inside the call). Modules are
looked up by name under the directories given with --win-dir and
--linux-dir. Each sequence runs from the capturing function up to and
including main (what lies beyond main is the C runtime's business). GCC
clone suffixes (.isra.0, .constprop.0, ...) are dropped.

Exits 0 when every capture point has the same label and the same function
sequence on both systems, 1 (printing the differences) otherwise."""
import argparse
import bisect
import os
import subprocess
import sys


def read_captures(path):
    caps, cur = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("CAPTURE "):
                cur = (line[8:], [])
            elif line.startswith("FRAME ") and cur is not None:
                _, mod, off = line.split(" ")
                cur[1].append((mod, int(off, 16)))
            elif line == "END" and cur is not None:
                caps.append(cur)
                cur = None
    return caps


class Symbolizer:
    def __init__(self, nm, objdump, dirs):
        self.nm, self.objdump, self.dirs = nm, objdump, dirs
        self.tables = {}

    def table(self, mod):
        if mod in self.tables:
            return self.tables[mod]
        path = next((os.path.join(d, mod) for d in self.dirs
                     if os.path.exists(os.path.join(d, mod))), None)
        tab = None
        if path:
            base = 0
            if self.objdump:
                out = subprocess.run([self.objdump, "-p", path], capture_output=True,
                                     text=True, check=True).stdout
                for line in out.splitlines():
                    if line.startswith("ImageBase"):
                        base = int(line.split()[1], 16)
            out = subprocess.run([self.nm, "--defined-only", path], capture_output=True,
                                 text=True, check=True).stdout
            syms = []
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "tTW":
                    syms.append((int(parts[0], 16) - base, parts[2]))
            syms.sort()
            tab = ([a for a, _ in syms], [n for _, n in syms])
        self.tables[mod] = tab
        return tab

    def name(self, mod, off):
        tab = self.table(mod)
        if not tab:
            return "?" + mod
        i = bisect.bisect_right(tab[0], off - 1) - 1
        if i < 0:
            return "?" + mod
        return tab[1][i].split(".")[0]


def sequences(caps, sym):
    out = []
    for label, frames in caps:
        names = []
        for mod, off in frames:
            names.append(sym.name(mod, off))
            if names[-1] == "main":
                break
        out.append((label, names))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("win")
    ap.add_argument("linux")
    ap.add_argument("--win-dir", action="append", default=[])
    ap.add_argument("--linux-dir", action="append", default=[])
    ap.add_argument("--win-nm", default="x86_64-w64-mingw32-nm")
    ap.add_argument("--win-objdump", default="x86_64-w64-mingw32-objdump")
    a = ap.parse_args()
    win = sequences(read_captures(a.win), Symbolizer(a.win_nm, a.win_objdump, a.win_dir))
    lin = sequences(read_captures(a.linux), Symbolizer("nm", None, a.linux_dir))
    bad = 0
    if len(win) != len(lin):
        print("different numbers of capture points: windows %d, linux %d" % (len(win), len(lin)))
        bad += 1
    frames = 0
    for (wl, ws), (ll, ls) in zip(win, lin):
        frames += len(ws)
        if wl != ll or ws != ls or not ws or ws[-1] != "main":
            bad += 1
            if bad <= 5:
                print("DIFFERENT at %s / %s" % (wl, ll))
                print("  windows: " + " < ".join(ws))
                print("  linux:   " + " < ".join(ls))
    print("%d capture points, %d functions compared, %d different" % (len(win), frames, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
