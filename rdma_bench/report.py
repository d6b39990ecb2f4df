#!/usr/bin/env python3
"""rdma_bench/report.py: the data of `./lab bench` (rdma_bench/bench runs the programs).

    report.py DIR        the table and the SVG plots of a run, from DIR/results.csv: writes
                         DIR/table.txt, DIR/summary.csv and DIR/*.svg; prints the table
    report.py --start CSV
                         start CSV (results.csv) with its header
    report.py --add CSV TOOL TEST SIZE ITERS PAIR KNOB VALUE FILE
                         parse FILE, the output of one run of perftest (TOOL perftest) or rdma_bench
                         (TOOL ours), and add its line to CSV; exit status 1 when FILE holds no result

Standard library only.
"""
import csv
import math
import os
import re
import statistics
import sys
from collections import defaultdict

CSV_HEADER = ("tool,test,size,iters,pair,knob,value,bw_MBps,rate_Mmsgps,lat_min_us,lat_median_us,lat_p99_us,"
              "lat_p999_us,lat_max_us,cpu_us_per_op")

# The numeric row of a result: a line of numbers only (bytes, iterations, then the measurements).
RESULT_ROW = re.compile(r"^\s*[0-9]+\s+[0-9]+(\s+[0-9.]+)+\s*$")

# Where each measurement is in that row (1 = the first column), by tool and mode. perftest's bandwidth
# row: #bytes #iterations BW_peak BW_average MsgRate; its latency row: #bytes #iterations t_min t_max
# t_typical t_avg t_stdev 99% 99.9%. rdma_bench's: bytes iterations MB/s Mmsg/s CPU_us/op, and bytes
# iterations min_us median_us p99_us p99.9_us max_us CPU_us/op.
COLUMNS = {
    ("perftest", "bw"): {"bw": 4, "rate": 5},
    ("perftest", "lat"): {"min": 3, "max": 4, "med": 5, "p99": 8, "p999": 9},
    ("ours", "bw"): {"bw": 3, "rate": 4, "cpu": 5},
    ("ours", "lat"): {"min": 3, "med": 4, "p99": 5, "p999": 6, "max": 7, "cpu": 8},
}
MEASUREMENTS = ["bw", "rate", "min", "med", "p99", "p999", "max", "cpu"]


def result_row(text):
    """The last numeric row of a tool's output, as a list of its fields; None when there is none."""
    rows = [line.split() for line in text.splitlines() if RESULT_ROW.match(line)]
    return rows[-1] if rows else None


def csv_line(tool, test, size, iters, pair, knob, value, text):
    """The results.csv line of one run (TEST such as write_bw), or None when TEXT holds no result."""
    row = result_row(text)
    if row is None:
        return None
    columns = COLUMNS.get((tool, test.split("_", 1)[-1]), {})
    measured = {m: (row[columns[m] - 1] if m in columns and columns[m] <= len(row) else "") for m in MEASUREMENTS}
    return ",".join([tool, test, size, iters, pair, knob, value] + [measured[m] for m in MEASUREMENTS])


def add_run(csv_path, tool, test, size, iters, pair, knob, value, path):
    with open(path, errors="replace") as f:
        text = f.read()
    line = csv_line(tool, test, size, iters, pair, knob, value, text)
    if line is None:
        print(f"bench: no result in {path}:", file=sys.stderr)
        sys.stderr.write("".join(text.splitlines(keepends=True)[-5:]))
        return 1
    with open(csv_path, "a") as f:
        f.write(line + "\n")
    return 0

TESTS = ["write_bw", "write_lat", "read_bw", "read_lat", "send_bw", "send_lat", "atomic_bw", "atomic_lat"]


def num(v):
    return float(v) if v not in ("", None) else None


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def median_of(rows, field):
    vals = [num(r[field]) for r in rows if num(r[field]) is not None]
    return statistics.median(vals) if vals else None


def comparison(rows):
    """(test, size) -> {tool: [rows]} for the perftest-vs-ours points (no knob)."""
    pts = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["knob"] == "":
            pts[(r["test"], int(r["size"]))][r["tool"]].append(r)
    return pts


def table(rows):
    lines = []
    hdr = f"{'test':<11}{'bytes':>8}  {'metric':<13}{'perftest':>11}{'ours':>11}{'ratio':>8}  {'target':<12}{'pairs':>5}"
    lines += [hdr, "-" * len(hdr)]
    summary = []
    pts = comparison(rows)
    for (test, size) in sorted(pts, key=lambda k: (TESTS.index(k[0]) if k[0] in TESTS else 99, k[1])):
        tools = pts[(test, size)]
        pt, us = tools.get("perftest", []), tools.get("ours", [])
        metrics = [("MB/s", "bw_MBps", True), ("Mmsg/s", "rate_Mmsgps", True)] if test.endswith("_bw") else \
                  [("median us", "lat_median_us", False), ("p99 us", "lat_p99_us", False)]
        for name, field, higher_better in metrics:
            a, b = median_of(pt, field), median_of(us, field)
            ratio = b / a if a and b is not None else None
            if ratio is None:
                verdict = "n/a"
            elif higher_better:
                verdict = "met (>=0.95)" if ratio >= 0.95 else f"MISSED {ratio:.2f}"
            else:
                verdict = "met (<=1.05)" if ratio <= 1.05 else f"MISSED {ratio:.2f}"
            fmt = lambda v: "-" if v is None else (f"{v:.4f}" if v < 1 else f"{v:.2f}")
            lines.append(f"{test:<11}{size:>8}  {name:<13}{fmt(a):>11}{fmt(b):>11}"
                         f"{'-' if ratio is None else f'{ratio:.2f}':>8}  {verdict:<12}{min(len(pt), len(us)):>5}")
            summary.append([test, size, name, a, b, ratio, verdict])
    return lines, summary


def knob_table(rows):
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["knob"]:
            groups[(r["knob"], r["test"], int(r["size"]))][r["value"]].append(r)
    lines = []
    for (knob, test, size), vals in groups.items():
        lines.append(f"--{knob} ({test}, {size} B):")
        for value, rs in vals.items():
            if test.endswith("_bw"):
                lines.append(f"    {value:>8}: {median_of(rs, 'bw_MBps'):10.2f} MB/s {median_of(rs, 'rate_Mmsgps'):10.6f} Mmsg/s"
                             f"  CPU {median_of(rs, 'cpu_us_per_op'):9.3f} us/op")
            else:
                lines.append(f"    {value:>8}: median {median_of(rs, 'lat_median_us'):9.2f} us, p99 {median_of(rs, 'lat_p99_us'):9.2f} us"
                             f"  CPU {median_of(rs, 'cpu_us_per_op'):9.3f} us/op")
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
    written = []
    for test, field, ylabel, name in [("write_bw", "bw_MBps", "MB/s (2^20 bytes/s)", "bw_vs_size.svg"),
                                      ("write_lat", "lat_median_us", "median latency, us", "lat_vs_size.svg")]:
        series = []
        for tool, label in [("perftest", f"perftest ib_{test}"), ("ours", f"rdma_bench {test}")]:
            series.append((label, [(size, median_of(t[tool], field)) for (tst, size), t in pts.items() if tst == test and t.get(tool)]))
        if any(p for _, p in series):
            svg_chart(os.path.join(outdir, name), f"{test}: perftest and rdma_bench (medians)", "message size, bytes",
                      ylabel, series, logx=True)
            written.append(name)
    for (knob, test, size), vals in groups.items():
        order = list(vals.keys())
        bw = test.endswith("_bw")
        field = "bw_MBps" if bw else "lat_median_us"
        series = [("MB/s" if bw else "median latency, us", [(i, median_of(vals[v], field)) for i, v in enumerate(order)]),
                  ("CPU us/op", [(i, median_of(vals[v], "cpu_us_per_op")) for i, v in enumerate(order)])]
        name = f"knob_{knob}_{test}.svg"
        svg_chart(os.path.join(outdir, name), f"--{knob}: {test}, {size} B (rdma_bench, medians)", f"--{knob}",
                  "value", series, categorical=order)
        written.append(name)
    return written


def main():
    if sys.argv[1:2] == ["--start"] and len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(CSV_HEADER + "\n")
        return 0
    if sys.argv[1:2] == ["--add"] and len(sys.argv) == 11:
        return add_run(*sys.argv[2:])
    if len(sys.argv) != 2:
        print("usage: report.py DIR (with DIR/results.csv)", file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    rows = load(os.path.join(outdir, "results.csv"))
    lines, summary = table(rows)
    klines, groups = knob_table(rows)
    setup = open(os.path.join(outdir, "setup.txt")).read().rstrip("\n") + "\n" if os.path.exists(os.path.join(outdir, "setup.txt")) else ""
    text = setup + "\n".join(lines) + "\n" + ("\nKnobs (rdma_bench alone):\n" + "\n".join(klines) + "\n" if klines else "")
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "size", "metric", "perftest_median", "ours_median", "ratio", "target"])
        w.writerows(summary)
    written = plots(rows, outdir, groups)
    print(text, end="")
    print(f"\nwrote {outdir}/results.csv (every run), summary.csv, table.txt and {len(written)} plots: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
