#!/usr/bin/env python3
"""tests/stress/tally.py: the accounting of tests/stress/stress, which runs the pairs and writes one line
per run to OUT/results.txt (tab-separated: pair, flow, PASS or FAIL, milliseconds, what, run folder).

    tally.py head OUT [--kill]                       start the table (OUT/table.txt)
    tally.py row OUT PAIR FLOW N [--kill] [--tap]    one table row (OUT/table.txt) for PAIR and FLOW;
                                                     with --tap also its TAP line N and, for a failed
                                                     run, what its folder says
    tally.py summary OUT RUNS SEED [--kill] [--tap]  print the table and the total; exit status 0 when
                                                     every run passed, 1 otherwise
    tally.py serve OUT [--kill] [--tap]              the same commands, one a line on standard input
                                                     ("head", "row PAIR FLOW N", "summary RUNS SEED"),
                                                     in one process; the exit status is the summary's.
                                                     (stress runs in the VM, where every start of
                                                     python3 costs about a second of emulated CPU)

The "what" of a run is reference (the normal run before the kills: its time is not counted),
kill-resp-STEP or kill-req-STEP (--kill), req-first or resp-first (which side started first).
"""
import argparse
import glob
import os
import sys

HEAD = "{:<24} {:<6} {:>5} {:>7} {:>7} {:>10} {:>9} {:>9}"


def runs_of(out, pair=None, flow=None):
    """The runs in OUT/results.txt, as dicts; only PAIR and FLOW's when given."""
    runs = []
    path = os.path.join(out, "results.txt")
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            p, fl, verdict, ms, what, folder = line.rstrip("\n").split("\t")
            if (pair is None or p == pair) and (flow is None or fl == flow):
                runs.append({"pair": p, "flow": fl, "passed": verdict == "PASS", "ms": int(ms), "what": what,
                             "folder": folder})
    return runs


def head(out, kill):
    """Start OUT/table.txt with the header (--kill: the times are the survivor's after the kill)."""
    extra = "kills" if kill else "req-first"
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(HEAD.format("pair", "flow", "runs", "passed", "failed", extra, "median_ms", "max_ms") + "\n")


def row(out, pair, flow, number, kill, tap):
    runs = runs_of(out, pair, flow)
    total = len(runs)
    passed = sum(r["passed"] for r in runs)
    failed = total - passed
    times = sorted(r["ms"] for r in runs if r["what"] != "reference")
    median = times[(len(times) + 1) // 2 - 1] if times else 0  # the lower median
    longest = times[-1] if times else 0
    if kill:
        extra = sum(r["what"].startswith("kill-") for r in runs)
    else:
        extra = sum(r["what"] == "req-first" for r in runs)
    table = os.path.join(out, "table.txt")
    with open(table, "a") as f:
        f.write(HEAD.format(pair, flow, total, passed, failed, extra, median, longest) + "\n")
    if not tap:
        return
    if failed == 0:
        print(f"ok {number} - {pair} ({flow}): {total} run(s) passed" + (", one per side and step killed" if kill else ""))
        return
    print(f"not ok {number} - {pair} ({flow}): {failed} of {total} run(s) failed")
    for r in runs:
        if r["passed"]:
            continue
        folder = r["folder"]
        try:
            with open(os.path.join(folder, "run.txt")) as f:
                about = f.read().rstrip("\n")
        except OSError:
            about = ""
        print(f"# {folder}: {about}")
        try:  # (the watchdog's word, when it ended a hang: stress's watchdog())
            with open(os.path.join(folder, "watchdog.txt")) as f:
                print(f"#   {f.read().rstrip()}")
        except OSError:
            pass
        for name in sorted(glob.glob(os.path.join(folder, "*.out"))):
            with open(name, errors="replace") as f:
                for line in f:
                    line = line.rstrip("\n")
                    if "failed" in line or line.startswith("hint"):
                        print(f"#   {line}")


def summary(out, runs_asked, seed, kill, tap):
    runs = runs_of(out)
    failed = sum(not r["passed"] for r in runs)
    with open(os.path.join(out, "table.txt")) as f:
        lines = f.read().splitlines()
    lines.append("")
    if kill:
        lines.append(f"{len(runs) - failed} of {len(runs)} runs passed")
    else:
        lines.append(f"{len(runs) - failed} of {len(runs)} runs passed "
                     f"(seed {seed}; replay: tests/stress/stress {runs_asked} --seed {seed})")
    for line in lines:
        print(f"# {line}" if tap else line)
    return 0 if failed == 0 else 1


def serve(out, kill, tap, commands):
    """Run each line of COMMANDS ("head", "row PAIR FLOW N", "summary RUNS SEED"); the summary's status."""
    status = 0
    for line in commands:
        words = line.split()
        try:
            if words == ["head"]:
                head(out, kill)
            elif len(words) == 4 and words[0] == "row":
                row(out, words[1], words[2], int(words[3]), kill, tap)
            elif len(words) == 3 and words[0] == "summary":
                status = summary(out, words[1], words[2], kill, tap)
            else:
                print(f"tally.py serve: not a command: {line.rstrip()!r}", file=sys.stderr)
                status = 2
        except (OSError, ValueError) as e:  # the run goes on, as it would after one failed tally.py
            print(f"tally.py serve: {line.rstrip()!r}: {e}", file=sys.stderr)
            status = 1
        sys.stdout.flush()
    return status


def main():
    parser = argparse.ArgumentParser(description="the accounting of tests/stress/stress")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("serve")
    v.add_argument("out")
    r = sub.add_parser("row")
    r.add_argument("out")
    r.add_argument("pair")
    r.add_argument("flow")
    r.add_argument("number", type=int)
    s = sub.add_parser("summary")
    s.add_argument("out")
    s.add_argument("runs")
    s.add_argument("seed")
    h = sub.add_parser("head")
    h.add_argument("out")
    for p in (r, s, h, v):
        p.add_argument("--kill", action="store_true")
        p.add_argument("--tap", action="store_true")
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args.out, args.kill, args.tap, sys.stdin)
    if args.command == "head":
        head(args.out, args.kill)
        return 0
    if args.command == "row":
        row(args.out, args.pair, args.flow, args.number, args.kill, args.tap)
        return 0
    return summary(args.out, args.runs, args.seed, args.kill, args.tap)


if __name__ == "__main__":
    sys.exit(main())
