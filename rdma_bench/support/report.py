#!/usr/bin/env python3
"""rdma_bench/support/report.py: the data of `./lab bench` (rdma_bench/support/bench runs the programs).

    report.py DIR        the table and the SVG plots of a run, from DIR/results.csv: writes
                         DIR/table.txt, DIR/summary.csv and DIR/*.svg; prints the table
    report.py --start CSV
                         start CSV (results.csv) with its header
    report.py --add CSV TOOL TEST SIZE ITERS PAIR KNOB VALUE WAIT FIRST FILE [API]
                         parse FILE, the output of one run of perftest (TOOL perftest) or rdma_bench
                         (TOOL ours), and add its line to CSV; exit status 1 when FILE holds no result.
                         API: the posting API both tools used (classic or extended)
    report.py --start-profile CSV
                         start CSV (profile.csv) with its header
    report.py --add-count CSV API TOOL TEST SIZE WAIT COUNTER ITERS FILE
                         add the count in FILE (API: the posting API both tools used, classic or extended;
                         COUNTER instructions: valgrind --tool=callgrind's log;
                         syscalls: strace -c's table) of a run of ITERS operations to CSV
    report.py --inline FILE
                         the inline size a perftest run really used, from its output FILE

Standard library only.
"""
import csv
import math
import os
import re
import statistics
import sys
from collections import defaultdict

CSV_HEADER = ("tool,test,size,iters,pair,knob,value,wait,first,inline,cq_mod,qps,bw_MBps,rate_Mmsgps,lat_min_us,"
              "lat_median_us,lat_p99_us,lat_p999_us,lat_max_us,user_us_per_op,sys_us_per_op,api")

# The numeric row of a result: a line of numbers only (bytes, iterations, then the measurements; perftest
# prints a standard deviation of "-nan" when a sample overflows its sum).
RESULT_ROW = re.compile(r"^\s*[0-9]+\s+[0-9]+(\s+([0-9.]+|-?nan|-?inf))+\s*$")

# Where each measurement is in that row (1 = the first column), by tool and mode. perftest's bandwidth
# row: #bytes #iterations BW_peak BW_average MsgRate; its latency row: #bytes #iterations t_min t_max
# t_typical t_avg t_stdev 99% 99.9%. rdma_bench's: bytes iterations MB/s Gb/s Mmsg/s user_us/op
# sys_us/op, and bytes iterations min_us median_us p99_us p99.9_us max_us user_us/op sys_us/op.
COLUMNS = {
    ("perftest", "bw"): {"bw": 4, "rate": 5},
    ("perftest", "lat"): {"min": 3, "max": 4, "med": 5, "p99": 8, "p999": 9},
    ("ours", "bw"): {"bw": 3, "rate": 5, "user": 6, "sys": 7},
    ("ours", "lat"): {"min": 3, "med": 4, "p99": 5, "p999": 6, "max": 7, "user": 8, "sys": 9},
}
MEASUREMENTS = ["bw", "rate", "min", "med", "p99", "p999", "max", "user", "sys"]

# What each tool really used, from its own log: perftest prints its parameters ("Max inline data :
# 0[B]", "CQ Moderation : 100", "Number of qps : 2"; it disables inline on devices it does not
# recognise, rxe among them), rdma_bench its step 3 ("and 2 QPs on it: ... signal every 100, inline up
# to 0 bytes"). The queue pairs (-q) are part of a point: a run is compared with runs on as many QPs.
PERFTEST_INLINE = re.compile(r"Max inline data\s*:\s*([0-9]+)")
PERFTEST_CQ_MOD = re.compile(r"CQ Moderation\s*:\s*([0-9]+)")
PERFTEST_QPS = re.compile(r"Number of qps\s*:\s*([0-9]+)")
OURS_SETTINGS = re.compile(r"signal every ([0-9]+), inline up to ([0-9]+) bytes")
OURS_QPS = re.compile(r"and ([0-9]+) QPs on it") # (one QP: "and a QP")


def result_row(text):
    """The last numeric row of a tool's output, as a list of its fields; None when there is none."""
    rows = [line.split() for line in text.splitlines() if RESULT_ROW.match(line)]
    return rows[-1] if rows else None


def settings(tool, text):
    """(inline size, CQ moderation, queue pairs) the run really used, as strings; "" where the log does not
    say (queue pairs: "1", as in the logs of tools that did not print it)."""
    found = lambda pattern, group=1: (lambda m: m.group(group) if m else "")(pattern.search(text))
    if tool == "perftest":
        return found(PERFTEST_INLINE), found(PERFTEST_CQ_MOD), found(PERFTEST_QPS) or "1"
    return found(OURS_SETTINGS, 2), found(OURS_SETTINGS, 1), found(OURS_QPS) or "1"


def csv_line(tool, test, size, iters, pair, knob, value, wait, first, text, api=""):
    """The results.csv line of one run (TEST such as write_bw), or None when TEXT holds no result."""
    row = result_row(text)
    if row is None:
        return None
    columns = COLUMNS.get((tool, test.split("_", 1)[-1]), {})
    measured = {m: (row[columns[m] - 1] if m in columns and columns[m] <= len(row) else "") for m in MEASUREMENTS}
    return ",".join([tool, test, size, iters, pair, knob, value, wait, first, *settings(tool, text)] +
                    [measured[m] for m in MEASUREMENTS] + [api])


def add_run(csv_path, tool, test, size, iters, pair, knob, value, wait, first, path, api=""):
    with open(path, errors="replace") as f:
        text = f.read()
    line = csv_line(tool, test, size, iters, pair, knob, value, wait, first, text, api)
    if line is None:
        print(f"bench: no result in {path}:", file=sys.stderr)
        sys.stderr.write("".join(text.splitlines(keepends=True)[-5:]))
        return 1
    with open(csv_path, "a") as f:
        f.write(line + "\n")
    return 0

# (cas_*: ib_atomic_* -A CMP_AND_SWAP beside rdma_bench --op atomic --atomic cas)
TESTS = ["write_bw", "write_lat", "read_bw", "read_lat", "send_bw", "send_lat", "atomic_bw", "atomic_lat", "cas_bw",
         "cas_lat"]

# Two-sided: a ratio more than 5% away from 1, in either direction, means the tools do not do the same
# work, or one of them does it worse.
TOLERANCE = 0.05
# Message rate, not MB/s, below this size: at 2 B, MB/s has too few digits to compare.
RATE_BELOW = 4096
MIN_RUNS = 3
# Latency tests that are ping-pongs between two busy-polling processes (READ and atomics are round trips
# the requester alone waits for): under single-threaded TCG each half waits for the emulator to switch
# vCPUs. Results whose setup line names no TCG threading are from single-threaded TCG (./lab bench used
# it before multi-threaded TCG).
PING_PONGS = ("write_lat", "send_lat")


def single_tcg(setup):
    """Whether setup.txt names a VM whose vCPUs took turns on one host thread."""
    return "TCG" in setup and "multi-threaded TCG" not in setup


def num(v):
    return float(v) if v not in ("", None) else None


def setup_text(outdir):
    """OUTDIR/setup.txt (what was measured where, written by the benchmark script), ending in one newline;
    empty when there is none."""
    path = os.path.join(outdir, "setup.txt")
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return f.read().rstrip("\n") + "\n"


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def values(rows, field):
    return [num(r[field]) for r in rows if num(r.get(field)) is not None]


def median_of(rows, field):
    vals = values(rows, field)
    return statistics.median(vals) if vals else None


def spread(vals):
    """(min, median, max) of VALS; None when there are none."""
    return (min(vals), statistics.median(vals), max(vals)) if vals else None


def verdict(theirs, ours, tolerance=TOLERANCE, min_runs=MIN_RUNS):
    """Compare two lists of runs. Returns (ratio of the medians, lowest and highest ratio the runs allow,
    verdict). The verdict is "same" or "DIFFERS" only when every pairing of the runs agrees (the range
    min(ours)/max(theirs) .. max(ours)/min(theirs) lies wholly inside, or wholly outside, 1 +- tolerance);
    otherwise the runs straddle the target and the verdict is "noise"."""
    if not theirs or not ours or min(theirs) <= 0:
        return None, None, None, "n/a"
    ratio = statistics.median(ours) / statistics.median(theirs)
    lo, hi = min(ours) / max(theirs), max(ours) / min(theirs)
    if min(len(theirs), len(ours)) < min_runs:
        return ratio, lo, hi, f"too few runs (<{min_runs})"
    if abs(ratio - 1) <= tolerance:
        same = 1 - tolerance <= lo and hi <= 1 + tolerance
        return ratio, lo, hi, "same" if same else "noise"
    apart = lo > 1 + tolerance or hi < 1 - tolerance
    return ratio, lo, hi, "DIFFERS" if apart else "noise"


def qps_of(row):
    """The queue pairs of a run (-q); 1 in a results.csv from before the column."""
    return int(row.get("qps") or 1)


def api_of(row):
    """The posting API both tools used in a run: "classic" or "extended"; "" in a results.csv from before
    the column (perftest posted the extended way then, rdma_bench the classic way)."""
    return row.get("api") or ""


def comparison(rows):
    """(test, size, wait, qps, api) -> {tool: [rows]} for the perftest-vs-ours points (no knob)."""
    pts = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["knob"] == "":
            pts[(r["test"], int(r["size"]), r.get("wait") or "busy", qps_of(r), api_of(r))][r["tool"]].append(r)
    return pts


def label(test, qps, api=""):
    """A point's name in the table: the test, its -q when there are several QPs ("write_bw -q4"), and "ext"
    when both tools posted with the extended API ("write_bw ext")."""
    return test + ("" if qps == 1 else f" -q{qps}") + (" ext" if api == "extended" else "")


def metric(test, size):
    """(name, field) of the one figure a point is judged by."""
    if test.endswith("_lat"):
        return "median us", "lat_median_us"
    return ("Mmsg/s", "rate_Mmsgps") if size < RATE_BELOW else ("MB/s", "bw_MBps")


def fmt(v):
    return "-" if v is None else f"{v:.4g}"


def used(rows):
    """What the runs really used: "inline,cq_mod" (one value, or every distinct one joined by /)."""
    def one(field):
        vals = sorted({r.get(field) or "-" for r in rows})
        return "/".join(vals) if vals else "-"
    return f"{one('inline')},{one('cq_mod')}"


def table(rows, tcg=False):
    lines = []
    pts = comparison(rows)
    width = max([11] + [len(label(test, qps, api)) + 1 for test, _, _, qps, api in pts]) # ("write_bw -q4 ": wider)
    hdr = (f"{'test':<{width}}{'bytes':>6} {'wait':<7}{'metric':<10}{'perftest min/med/max':>24}  {'ours min/med/max':>24}"
           f"{'ratio':>7} {'range':>11}  {'verdict':<9}{'runs':>5}  {'I,Q perftest|ours'}")
    lines += [hdr, "-" * len(hdr)]
    summary = []
    order = lambda k: (TESTS.index(k[0]) if k[0] in TESTS else 99, k[1], k[2], k[3], k[4])
    for (test, size, wait, qps, api) in sorted(pts, key=order):
        tools = pts[(test, size, wait, qps, api)]
        pt, us = tools.get("perftest", []), tools.get("ours", [])
        name, field = metric(test, size)
        a, b = spread(values(pt, field)), spread(values(us, field))
        ratio, lo, hi, say = verdict(values(pt, field), values(us, field))
        show = lambda t: "-" if t is None else "/".join(fmt(v) for v in t)
        mark = "*" if tcg and wait == "busy" and test in PING_PONGS else ""
        lines.append(f"{label(test, qps, api):<{width}}{size:>6} {wait + mark:<7}{name:<10}{show(a):>24}  {show(b):>24}"
                     f"{'-' if ratio is None else f'{ratio:.2f}':>7} "
                     f"{'-' if lo is None else f'{lo:.2f}-{hi:.2f}':>11}  {say:<9}{min(len(pt), len(us)):>5}"
                     f"  {used(pt)}|{used(us)}")
        summary.append([test, size, wait, qps, name, *(a or (None,) * 3), *(b or (None,) * 3), ratio, lo, hi, say, api])
    if any(api == "extended" for *_, api in pts):
        lines.append("ext: both tools posted with the extended API (ibv_wr_*(), perftest's default); the other rows "
                     "with ibv_post_send() (rdma_bench --api classic, perftest --use_old_post_send)")
    if tcg and any(wait == "busy" and test in PING_PONGS for test, _, wait, _, _ in pts):
        lines.append("* a busy-polling ping-pong under single-threaded TCG: it measures the emulator's switch between "
                     "the two vCPUs (about 2 ms), not RDMA")
    return lines, summary


PROFILE_HEADER = "api,tool,test,size,wait,counter,iters,count"
CALLGRIND_TOTAL = re.compile(r"Collected\s*:\s*([0-9]+)")


def count_of(counter, text):
    """The total of one counted run: callgrind's "Collected : N" (user-space instructions), or the calls
    of strace -c's "total" line (system calls); None when TEXT holds none."""
    if counter == "instructions":
        m = CALLGRIND_TOTAL.search(text)
        return int(m.group(1)) if m else None
    for line in reversed(text.splitlines()):
        fields = line.split()
        if len(fields) >= 5 and fields[-1] == "total":
            return int(fields[3])
    return None


def add_count(csv_path, api, tool, test, size, wait, counter, iters, path):
    with open(path, errors="replace") as f:
        count = count_of(counter, f.read())
    if count is None:
        print(f"bench: no {counter} count in {path}", file=sys.stderr)
        return 1
    with open(csv_path, "a") as f:
        f.write(f"{api},{tool},{test},{size},{wait},{counter},{iters},{count}\n")
    return 0


def per_operation(rows):
    """(test, size, wait, api) -> {(tool, counter): count per operation}: the difference between the runs
    with the most and the fewest iterations over the difference of the iterations (the set-up cancels).
    A profile written before the API was recorded has none: "mixed" (perftest's extended, ours classic)."""
    runs = defaultdict(dict)
    for r in rows:
        api = r.get("api") or "mixed"
        runs[(r["test"], int(r["size"]), r["wait"], api, r["tool"], r["counter"])][int(r["iters"])] = int(r["count"])
    out = defaultdict(dict)
    for (test, size, wait, api, tool, counter), by_iters in runs.items():
        if len(by_iters) >= 2:
            few, many = min(by_iters), max(by_iters)
            out[(test, size, wait, api)][(tool, counter)] = (by_iters[many] - by_iters[few]) / (many - few)
    return out


def profile_table(rows):
    """The counts per operation: instructions (target: ours <= perftest's) and system calls."""
    hdr = (f"{'test':<11}{'bytes':>6} {'wait':<7}{'api':<9}{'instr perftest':>15}{'ours':>8}{'ratio':>7}  {'target':<13}"
           f"{'syscalls perftest':>18}{'ours':>8}")
    lines = [hdr, "-" * len(hdr)]
    counts = per_operation(rows)
    one = lambda v: "-" if v is None else f"{v:.0f}" if v >= 10 else f"{v:.2f}"
    for key in sorted(counts, key=lambda k: (k[2], TESTS.index(k[0]) if k[0] in TESTS else 99, k[1], k[3])):
        c = counts[key]
        a, b = c.get(("perftest", "instructions")), c.get(("ours", "instructions"))
        if a is not None and b is not None and (a <= 0 or b <= 0):
            ratio, target = None, "unsteady" # the longer run counted fewer: the set-up varied more than that
        else:
            ratio = b / a if a and b is not None else None
            target = "n/a" if ratio is None else "met (<=)" if b <= a else f"MISSED {ratio:.2f}"
        lines.append(f"{key[0]:<11}{key[1]:>6} {key[2]:<7}{key[3]:<9}{one(a):>15}{one(b):>8}"
                     f"{'-' if ratio is None else f'{ratio:.2f}':>7}  {target:<13}"
                     f"{one(c.get(('perftest', 'syscalls'))):>18}{one(c.get(('ours', 'syscalls'))):>8}")
    return lines


def knob_table(rows):
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["knob"]:
            groups[(r["knob"], r["test"], int(r["size"]))][r["value"]].append(r)
    lines = []
    for (knob, test, size), vals in groups.items():
        lines.append(f"--{knob} ({test}, {size} B):")
        name, field = metric(test, size)
        for value, rs in vals.items():
            lo, med, hi = spread(values(rs, field))
            lines.append(f"    {value:>8}: {name} {fmt(med):>8} [{fmt(lo)}-{fmt(hi)}]  user {median_of(rs, 'user_us_per_op'):9.3f}"
                         f" sys {median_of(rs, 'sys_us_per_op'):9.3f} us/op  ({len(rs)} runs)")
    return lines, groups


# --- SVG -------------------------------------------------------------------------------------------

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    t = math.floor(lo / step) * step
    out = []
    while True:
        out.append(t)
        if t >= hi:
            return out
        t += step


def svg_chart(path, title, xlabel, ylabel, series, logx=False, categorical=None):
    """series: [(label, [(x, y)])]. logx: x on a log2 axis. categorical: list of x labels (x = index)."""
    W, H, L, R, T, B = 760, 400, 80, 230, 40, 60
    pw, ph = W - L - R, H - T - B
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts if y is not None]
    if not xs or not ys:
        return
    fx = (lambda x: math.log2(x)) if logx else (lambda x: x)
    x0, x1 = min(map(fx, xs)), max(map(fx, xs))
    if categorical is not None:
        x0, x1 = -0.5, len(categorical) - 0.5
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    yt = nice_ticks(0, max(ys) * 1.05)
    y0, y1 = 0, yt[-1]
    X = lambda x: L + (fx(x) - x0) / (x1 - x0) * pw if categorical is None else L + (x - x0) / (x1 - x0) * pw
    Y = lambda y: T + ph - (y - y0) / (y1 - y0) * ph
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L + pw / 2}" y="22" text-anchor="middle" font-size="14">{esc(title)}</text>',
         f'<line x1="{L}" y1="{T + ph}" x2="{L + pw}" y2="{T + ph}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{T + ph}" stroke="black"/>']
    for t in yt:
        o.append(f'<line x1="{L}" y1="{Y(t):.1f}" x2="{L + pw}" y2="{Y(t):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    if categorical is not None:
        xticks = [(i, c) for i, c in enumerate(categorical)]
    else:
        xticks = [(x, (f"{x // 1024}K" if x >= 1024 else str(x)) if logx else f"{x:g}") for x in sorted(set(xs))]
    for x, lab in xticks:
        o.append(f'<line x1="{X(x):.1f}" y1="{T + ph}" x2="{X(x):.1f}" y2="{T + ph + 5}" stroke="black"/>')
        o.append(f'<text x="{X(x):.1f}" y="{T + ph + 18}" text-anchor="middle">{esc(lab)}</text>')
    o.append(f'<text x="{L + pw / 2}" y="{H - 15}" text-anchor="middle">{esc(xlabel)}</text>')
    o.append(f'<text x="18" y="{T + ph / 2}" text-anchor="middle" transform="rotate(-90 18 {T + ph / 2})">{esc(ylabel)}</text>')
    for i, (label, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        pts = [(x, y) for x, y in sorted(pts) if y is not None]
        if len(pts) > 1:
            o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' +
                     " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts) + '"/>')
        for x, y in pts:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3.5" fill="{c}"><title>{esc(label)}: {y:g}</title></circle>')
        o.append(f'<rect x="{L + pw + 15}" y="{T + 10 + i * 20}" width="12" height="12" fill="{c}"/>')
        o.append(f'<text x="{L + pw + 32}" y="{T + 20 + i * 20}">{esc(label)}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def plots(rows, outdir, groups):
    pts = comparison(rows)
    # One API per plot: the classic one when the runs hold it (the knobs are measured with it too)
    apis = {api for *_, api in pts}
    shown = "classic" if "classic" in apis else min(apis, default="")
    written = []
    for test, field, ylabel, name in [("write_bw", "bw_MBps", "MB/s (2^20 bytes/s)", "bw_vs_size.svg"),
                                      ("write_lat", "lat_median_us", "median latency, us", "lat_vs_size.svg")]:
        series = []
        for tool, label in [("perftest", f"perftest ib_{test}"), ("ours", f"rdma_bench {test}")]:
            series.append((label, [(size, median_of(t[tool], field)) for (tst, size, wait, qps, api), t in pts.items()
                                   if tst == test and wait == "busy" and qps == 1 and api == shown and t.get(tool)]))
        if any(p for _, p in series):
            svg_chart(os.path.join(outdir, name), f"{test}: perftest and rdma_bench (medians)", "message size, bytes",
                      ylabel, series, logx=True)
            written.append(name)
    for (knob, test, size), vals in groups.items():
        order = list(vals.keys())
        bw = test.endswith("_bw")
        name, field = metric(test, size)
        series = [(name if bw else "median latency, us", [(i, median_of(vals[v], field)) for i, v in enumerate(order)])]
        name = f"knob_{knob}_{test}.svg"
        svg_chart(os.path.join(outdir, name), f"--{knob}: {test}, {size} B (rdma_bench, medians)", f"--{knob}",
                  "value", series, categorical=order)
        written.append(name)
    return written


def main():
    headers = {"--start": CSV_HEADER, "--start-profile": PROFILE_HEADER}
    if sys.argv[1:2] and sys.argv[1] in headers and len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(headers[sys.argv[1]] + "\n")
        return 0
    if sys.argv[1:2] == ["--add"] and len(sys.argv) in (13, 14):
        return add_run(*sys.argv[2:])
    if sys.argv[1:2] == ["--add-count"] and len(sys.argv) == 11:
        return add_count(*sys.argv[2:])
    if sys.argv[1:2] == ["--inline"] and len(sys.argv) == 3:
        with open(sys.argv[2], errors="replace") as f:
            print(settings("perftest", f.read())[0])
        return 0
    if len(sys.argv) != 2:
        print("usage: report.py DIR (with DIR/results.csv)", file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    rows = load(os.path.join(outdir, "results.csv")) if os.path.exists(os.path.join(outdir, "results.csv")) else []
    setup = setup_text(outdir)
    lines, summary = table(rows, tcg=single_tcg(setup))
    klines, groups = knob_table(rows)
    text = setup + "\n".join(lines) + "\n" + ("\nKnobs (rdma_bench alone):\n" + "\n".join(klines) + "\n" if klines else "")
    profile_csv = os.path.join(outdir, "profile.csv")
    if os.path.exists(profile_csv):
        text += ("\nPer operation, perftest's client and rdma_bench's requester: user-space instructions (callgrind) "
                 "and system calls (strace -c -f)\n" + "\n".join(profile_table(load(profile_csv))) + "\n")
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "size", "wait", "qps", "metric", "perftest_min", "perftest_median", "perftest_max", "ours_min",
                    "ours_median", "ours_max", "ratio", "ratio_low", "ratio_high", "verdict", "api"])
        w.writerows(summary)
    written = plots(rows, outdir, groups)
    print(text, end="")
    print(f"\nwrote {outdir}/results.csv (every run), summary.csv, table.txt and {len(written)} plots: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
