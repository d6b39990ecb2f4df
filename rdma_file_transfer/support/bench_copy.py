#!/usr/bin/env python3
"""rdma_file_transfer/support/bench_copy.py: the data of `./lab bench-copy` (bench-copy runs the programs).

    bench_copy.py DIR     the table and the SVG plots of a run, from DIR/results.csv: writes
                          DIR/table.txt, DIR/stages.svg and DIR/memory.svg; prints the table
    bench_copy.py --start CSV
                          start CSV (results.csv) with its header
    bench_copy.py --add CSV STAGE RUN BYTES LOG [RECEIVER_LOG]
                          add the line of one run: STAGE write_bw (LOG: ib_write_bw's output), transfer
                          (LOG: rdma_bench's output), sha256,
                          disk, copy or memory (LOG.time: "elapsed_s max_rss_kB" from /usr/bin/time;
                          copy and memory also need the sender's lines in LOG: its "sent N bytes in S s"
                          is the copy's time, like perftest's, and the receiver's LOG.time); LOG.cpu:
                          "busy_ticks ticks_per_second cpus", the CPU time the whole machine spent
                          during the run and its CPU count; exit status 1 when a log holds no result

The roofline: every stage is CPU work on the same machine in the VM (rxe's copies and CRCs, SHA-256,
the write), so a stage alone has all the CPUs and the copy never can. The copy's CPU bound is the CPUs
divided by the CPU seconds per MiB of its work (one SHA-256 pass on each side, the transfer, the disk
write); the roofline is the lower of that and the slowest stage.

Standard library only; the table's rows, setup.txt and the plotter are rdma_bench/support/report.py's.
"""
import csv
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rdma_bench", "support"))
from report import result_row, setup_text, svg_chart  # noqa: E402  (perftest's result row; setup.txt; the SVG plotter)

CSV_HEADER = "stage,run,bytes,seconds,MiBps,sender_rss_kB,receiver_rss_kB,cpu_s,cpus"
# The copy's work in stages: the sender hashes each chunk as it reads it, the device moves it, the
# receiver hashes and writes its copy (protocol version 2: one SHA-256 pass on each side).
# The transfer is rdma_bench's, which moves the chunks as the copy does (WRITE with immediate, events);
# perftest's write_bw, which busy-polls, stands in only for results that lack it.
COPY_WORK = {"sha256": 2, "transfer": 1, "disk": 1}
STAGES = ["write_bw", "transfer", "sha256", "disk", "copy"]
MiB = 1 << 20


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def elapsed_rss(log):
    """(elapsed seconds, max RSS kB) of a run, from LOG.time (/usr/bin/time -f '%e %M')."""
    fields = read(log + ".time").split()
    return float(fields[-2]), int(fields[-1])


def sent_seconds(text):
    """The sender's "sent N bytes in S s, ..." line: S, the transfer of the bytes alone (not the
    connection, the verdict or the key), as perftest times only its messages; None when missing."""
    m = re.search(r"^sent [0-9]+ bytes in ([0-9.]+) s", text, re.M)
    return float(m.group(1)) if m else None


def cpu(log):
    """(busy CPU seconds of the machine during the run, its CPU count) from LOG.cpu ("busy_ticks
    ticks_per_second cpus"), or ("", "")."""
    if not os.path.exists(log + ".cpu"):
        return "", ""
    ticks, hz, cpus = read(log + ".cpu").split()[:3]
    return f"{int(ticks) / int(hz):.2f}", str(int(cpus))


def csv_line(stage, run, size, log, receiver_log=None):
    """The results.csv line of one run, or None when its logs hold no result."""
    size = int(size)
    sender_rss = receiver_rss = ""
    if stage in ("write_bw", "transfer"):
        # perftest: #bytes #iterations BW_peak BW_average MsgRate; rdma_bench: bytes iterations MB/s ...
        # (both count MB as 2^20 bytes)
        row = result_row(read(log))
        column = 3 if stage == "write_bw" else 2
        if row is None or len(row) <= column:
            return None
        mibps = float(row[column])
        seconds = size / MiB / mibps if mibps > 0 else 0.0
    else:
        seconds, rss = elapsed_rss(log)
        if stage in ("copy", "memory"):
            text = read(log)
            lines = text.rstrip("\n").splitlines()
            if not lines or lines[-1] != "Sample finished successfully" or sent_seconds(text) is None:
                return None
            seconds = sent_seconds(text)
            sender_rss, receiver_rss = rss, elapsed_rss(receiver_log)[1]
        seconds = max(seconds, 0.01)  # (both clocks count in hundredths)
        mibps = size / MiB / seconds
    cpu_s, cpus = cpu(log)
    return f"{stage},{run},{size},{seconds:.3f},{mibps:.2f},{sender_rss},{receiver_rss},{cpu_s},{cpus}"


def add_run(csv_path, stage, run, size, log, receiver_log=None):
    try:
        line = csv_line(stage, run, size, log, receiver_log)
    except (OSError, ValueError, IndexError):
        line = None
    if line is None:
        print(f"bench-copy: no result in {log}:", file=sys.stderr)
        if os.path.exists(log):
            sys.stderr.write("".join(read(log).splitlines(keepends=True)[-5:]))
        return 1
    with open(csv_path, "a") as f:
        f.write(line + "\n")
    return 0


def human(size):
    for unit, n in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if size >= n and size % n == 0:
            return f"{size // n} {unit}"
    return f"{size} B"


def stage_stats(rows):
    """stage -> (min, median, max, runs) of MiB/s."""
    out = {}
    for stage in STAGES:
        vals = [float(r["MiBps"]) for r in rows if r["stage"] == stage]
        if vals:
            out[stage] = (min(vals), statistics.median(vals), max(vals), len(vals))
    return out


def copy_work(stats):
    """The stages of the copy's work and how often each runs: COPY_WORK, with perftest's write_bw for
    the transfer when the results have no rdma_bench transfer."""
    if "transfer" in stats:
        return dict(COPY_WORK)
    return {"sha256": 2, "write_bw": 1, "disk": 1}


def cpu_per_mib(rows):
    """stage -> (min, median, max) CPU seconds per MiB, the machine's busy time over the bytes; and the
    machine's CPU count (None when the runs recorded no CPU time)."""
    out, cpus = {}, set()
    for stage in STAGES:
        vals = [float(r["cpu_s"]) / (int(r["bytes"]) / MiB) for r in rows
                if r["stage"] == stage and r.get("cpu_s")]
        cpus |= {int(r["cpus"]) for r in rows if r["stage"] == stage and r.get("cpus")}
        if vals:
            out[stage] = (min(vals), statistics.median(vals), max(vals))
    return out, (max(cpus) if cpus else None)


def table(rows):
    stats = stage_stats(rows)
    hdr = f"{'stage':<10}{'MiB/s min':>11}{'median':>10}{'max':>10}{'runs':>6}"
    lines = [hdr, "-" * len(hdr)]
    for stage, (lo, med, hi, n) in stats.items():
        lines.append(f"{stage:<10}{lo:>11.1f}{med:>10.1f}{hi:>10.1f}{n:>6}")
    per_mib, cpus = cpu_per_mib(rows)
    if per_mib:
        lines += ["", f"{'stage':<10}{'CPU s/MiB min':>15}{'median':>10}{'max':>10}"]
        for stage, (lo, med, hi) in per_mib.items():
            lines.append(f"{stage:<10}{lo:>15.3f}{med:>10.3f}{hi:>10.3f}")
        lines.append("")
    work_stages = copy_work(stats)
    alone = {s: v for s, v in stats.items() if s in work_stages}
    if "copy" in stats and alone:
        slowest = min(alone, key=lambda s: alone[s][1])
        roofline = alone[slowest][1]
        work = sum(n * per_mib[s][1] for s, n in work_stages.items()) if all(s in per_mib for s in work_stages) else 0
        if cpus and work > 0:  # (a run too short for the clock's ticks measures no CPU time)
            bound = cpus / work
            terms = " + ".join((f"{n} x " if n > 1 else "") + s for s, n in work_stages.items())
            lines.append(f"CPU bound: {cpus} CPUs / ({terms} = {work:.3f} CPU s/MiB) = {bound:.1f} MiB/s")
            roofline = min(roofline, bound)
            lines.append(f"copy / roofline: {stats['copy'][1] / roofline:.2f} (medians; roofline "
                         f"{roofline:.1f} MiB/s, the lower of the CPU bound and the slowest stage; target 0.80)")
        ratio = stats["copy"][1] / alone[slowest][1]
        lines.append(f"copy / slowest stage ({slowest}): {ratio:.2f} (medians; target 0.50)")
    if "copy" in stats and all(s in stats for s in work_stages):
        # The copy's work, one stage after the other.
        series = sum(n / stats[s][1] for s, n in work_stages.items())
        terms = " + ".join((f"{n} x " if n > 1 else "") + s for s, n in work_stages.items())
        lines.append(f"copy / stages in series ({terms} = {1 / series:.1f} MiB/s): {stats['copy'][1] * series:.2f}")
    memory = [r for r in rows if r["stage"] == "memory"]
    if memory:
        lines += ["", f"{'file':<10}{'sender max RSS':>16}{'receiver max RSS':>18}"]
        for r in sorted(memory, key=lambda r: int(r["bytes"])):
            lines.append(f"{human(int(r['bytes'])):<10}{int(r['sender_rss_kB']) / 1024:>12.1f} MiB"
                         f"{int(r['receiver_rss_kB']) / 1024:>14.1f} MiB")
    return lines, stats, memory


def plots(outdir, stats, memory):
    written = []
    names = [s for s in STAGES if s in stats]
    if names:
        series = [(label, [(i, stats[s][k]) for i, s in enumerate(names)])
                  for label, k in (("median", 1), ("min", 0), ("max", 2))]
        svg_chart(os.path.join(outdir, "stages.svg"), "Each stage alone, and the whole copy", "stage", "MiB/s",
                  series, categorical=names)
        written.append("stages.svg")
    if memory:
        memory = sorted(memory, key=lambda r: int(r["bytes"]))
        sizes = [human(int(r["bytes"])) for r in memory]
        series = [(side, [(i, int(r[f"{side}_rss_kB"]) / 1024) for i, r in enumerate(memory)])
                  for side in ("sender", "receiver")]
        svg_chart(os.path.join(outdir, "memory.svg"), "Peak memory (max RSS) by file size", "file size",
                  "max RSS, MiB", series, categorical=sizes)
        written.append("memory.svg")
    return written


def main():
    if sys.argv[1:2] == ["--start"] and len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(CSV_HEADER + "\n")
        return 0
    if sys.argv[1:2] == ["--add"] and len(sys.argv) in (7, 8):
        return add_run(*sys.argv[2:])
    if len(sys.argv) != 2:
        print("usage: bench_copy.py DIR (with DIR/results.csv)", file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    with open(os.path.join(outdir, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    lines, stats, memory = table(rows)
    setup = setup_text(outdir)
    text = setup + "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    written = plots(outdir, stats, memory)
    print(text, end="")
    print(f"\nwrote {outdir}/results.csv (every run), table.txt and the plots {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
