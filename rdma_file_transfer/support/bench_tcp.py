#!/usr/bin/env python3
"""bench_tcp.py: the data and the report of `./lab bench-tcp` (rdma_file_transfer/support/bench-tcp).

    bench_tcp.py --start CSV                       write the header of results.csv
    bench_tcp.py --add CSV PROVIDER TRANSPORT LOSS ROUND BYTES SENDER_STATUS RECEIVER_STATUS PREFIX
                                                   one copy: PREFIX.sender, .receiver, .time (the sender's
                                                   start to its end, /usr/bin/time), the counters of
                                                   both hosts before and after (.a0 .a1 .b0 .b1) and
                                                   host A's capture of the data packets (.pcap)
    bench_tcp.py --add-qperf CSV PROVIDER TEST LOG one qperf result (tcp_bw, rc_bw: MB/s; tcp_lat, rc_lat: us)
    bench_tcp.py --add-bench CSV PROVIDER LABEL LOG  rdma_bench's latency (its median, us)
    bench_tcp.py --add-strace CSV PROVIDER TRANSPORT SIDE BYTES FILE
                                                   one side's system calls in a copy (strace -c -f)
    bench_tcp.py DIR                               the table (DIR/table.txt) and the plot (goodput.svg)

The counters are `grep -H '' /proc/stat /proc/net/snmp .../hw_counters/*` of each VM: the CPU time of
the whole VM (user, system, softirq: rxe and siw do their work in softirq and kernel threads, which a
per-process count would miss), TCP's segments sent and retransmitted, and rxe's counters; host A's also
the capture's /proc/PID/stat, whose CPU time is taken out of host A's.
"""
import csv
import os
import re
import statistics
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rdma_bench", "support"))
from report import num, result_row, setup_text, svg_chart  # noqa: E402  (a number or None; a result row; setup.txt; the SVG plotter)

USER_HZ = 100  # /proc/stat's unit (sysconf(_SC_CLK_TCK) on Linux)
GIB = 1 << 30
MIB = 1 << 20
# rxe's counters that say what loss did (drivers/infiniband/sw/rxe/rxe_hw_counters.c), both hosts summed
RXE = ["sent_pkts", "out_of_seq_request", "rcvd_seq_err", "duplicate_request", "completer_retry_err",
       "retry_exceeded_err"]
COLUMNS = (["provider", "transport", "loss", "round", "bytes", "ok", "seconds", "sent_seconds",
            "cpu_a", "cpu_b", "sys_a", "sys_b", "tcp_out_a", "tcp_out_b", "tcp_retrans_a", "tcp_retrans_b"]
           + ["rxe_" + name for name in RXE] + ["value", "unit", "error", "detail", "stall"])


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def counters(text):
    """{name: number} of one snapshot: cpu_busy and cpu_sys (seconds), tcp_OutSegs, tcp_RetransSegs and
    every hw_counter by its file name."""
    found = {}
    tcp_names = None
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        if path == "/proc/stat" and rest.startswith("cpu ") and all(n.isdigit() for n in rest.split()[1:]):
            ticks = [int(n) for n in rest.split()[1:]]
            user, nice, system, idle, iowait, irq, softirq = (ticks + [0] * 7)[:7]
            steal = ticks[7] if len(ticks) > 7 else 0
            found["cpu_busy"] = (user + nice + system + irq + softirq + steal) / USER_HZ
            found["cpu_sys"] = (system + irq + softirq) / USER_HZ
        elif path == "/proc/net/snmp" and rest.startswith("Tcp:"):
            fields = rest.split()[1:]
            if tcp_names is None:
                tcp_names = fields
            else:
                for name, value in zip(tcp_names, fields):
                    if name in ("OutSegs", "RetransSegs") and value.lstrip("-").isdigit():
                        found["tcp_" + name] = int(value)
        elif "/hw_counters/" in path and rest.strip().isdigit():
            found[os.path.basename(path)] = int(rest.strip())
        elif re.fullmatch(r"/proc/[0-9]+/stat", path):
            # "pid (comm) state ...": utime and stime are the 14th and 15th fields, the 12th and 13th
            # after the command's closing parenthesis
            fields = rest.rpartition(")")[2].split()
            if len(fields) > 12 and fields[11].isdigit() and fields[12].isdigit():
                found["capture_cpu"] = (int(fields[11]) + int(fields[12])) / USER_HZ
    return found


def longest_gap(path):
    """The longest time between two packets of a pcap file (seconds), "" with fewer than two or none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    if len(data) < 24:
        return ""
    magic = struct.unpack_from("<I", data)[0]
    order, scale = {0xa1b2c3d4: ("<", 1e-6), 0xa1b23c4d: ("<", 1e-9),
                    0xd4c3b2a1: (">", 1e-6), 0x4d3cb2a1: (">", 1e-9)}.get(magic, (None, None))
    if order is None:
        return ""
    times, at = [], 24
    while at + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack_from(order + "IIII", data, at)
        times.append(sec + frac * scale)
        at += 16 + caplen
    gaps = [b - a for a, b in zip(times, times[1:])]
    return round(max(gaps), 4) if gaps else ""


def delta(before, after, name):
    return after[name] - before[name] if name in before and name in after else ""


def sent_seconds(text):
    """The sender's "sent N bytes in S s" line: S, the chunks alone (both programs print it)."""
    m = re.search(r"^sent [0-9]+ bytes in ([0-9.]+) s", text, re.M)
    return float(m.group(1)) if m else ""


def failure(sender, receiver):
    """The first line that says why a side failed ("sender: step 5 failed: ..."), or ""."""
    for text in (sender, receiver):
        m = re.search(r"^\S+: step [0-9]+ failed: .*$", text, re.M)
        if m:
            return m.group(0)[:200]
    return ""


def copy_row(provider, transport, loss, round_, size, sender_status, receiver_status, prefix):
    sender, receiver = read(prefix + ".sender"), read(prefix + ".receiver")
    a0, a1, b0, b1 = (counters(read(f"{prefix}.{k}")) for k in ("a0", "a1", "b0", "b1"))
    verified = "Receiver's digest matches ours" in sender
    ok = sender_status == "0" and receiver_status == "0" and verified
    elapsed = read(prefix + ".time").strip().splitlines()
    seconds = float(elapsed[-1]) if elapsed and re.fullmatch(r"[0-9.]+", elapsed[-1]) else ""
    row = {"provider": provider, "transport": transport, "loss": loss, "round": round_, "bytes": size,
           "ok": int(ok), "seconds": seconds, "sent_seconds": sent_seconds(sender),
           "cpu_a": delta(a0, a1, "cpu_busy"), "cpu_b": delta(b0, b1, "cpu_busy"),
           "sys_a": delta(a0, a1, "cpu_sys"), "sys_b": delta(b0, b1, "cpu_sys"),
           "tcp_out_a": delta(a0, a1, "tcp_OutSegs"), "tcp_out_b": delta(b0, b1, "tcp_OutSegs"),
           "tcp_retrans_a": delta(a0, a1, "tcp_RetransSegs"), "tcp_retrans_b": delta(b0, b1, "tcp_RetransSegs"),
           "value": "", "unit": "", "stall": longest_gap(prefix + ".pcap"),
           "error": "" if ok else (failure(sender, receiver) or "no verdict (see the logs)")}
    capture = delta(a0, a1, "capture_cpu")
    if row["cpu_a"] != "" and capture != "":
        row["cpu_a"] -= capture  # (tcpdump's own; its packets' copies in softirq stay, alike for both)
    for name in RXE:
        parts = [delta(a0, a1, name), delta(b0, b1, name)]
        row["rxe_" + name] = sum(parts) if all(p != "" for p in parts) else ""
    for k in ("cpu_a", "cpu_b", "sys_a", "sys_b"):
        row[k] = round(row[k], 2) if row[k] != "" else ""
    return row


def qperf_row(provider, test, log):
    """qperf's result: "bw = 123 MB/sec" (converted to MB/s) or "latency = 45.6 us"."""
    text = read(log)
    scale = {"": 1, "K": 1e-3, "M": 1, "G": 1e3}
    m = re.search(r"^\s*bw\s*=\s*([0-9.]+)\s*([KMG]?)B/sec", text, re.M)
    value, unit = (float(m.group(1)) * scale[m.group(2)], "MB/s") if m else ("", "")
    m = re.search(r"^\s*latency\s*=\s*([0-9.]+)\s*(us|ms|sec)", text, re.M)
    if m:
        value, unit = float(m.group(1)) * {"us": 1, "ms": 1e3, "sec": 1e6}[m.group(2)], "us"
    row = {k: "" for k in COLUMNS}
    row.update({"provider": provider, "transport": "qperf " + test, "ok": int(value != ""), "value": value,
                "unit": unit, "error": "" if value != "" else (text.strip().splitlines() or ["no output"])[-1][:200]})
    return row


def bench_row(provider, label, log):
    """rdma_bench's latency row (bytes, iterations, min, median, ...): its median, in us."""
    text = read(log)
    fields = result_row(text) or []
    value = float(fields[3]) if len(fields) > 3 else ""
    row = {k: "" for k in COLUMNS}
    row.update({"provider": provider, "transport": "rdma_bench " + label, "ok": int(value != ""), "value": value,
                "unit": "us",
                "error": "" if value != "" else failure(text, "") or (text.strip().splitlines() or ["no output"])[-1][:200]})
    return row


def strace_row(provider, transport, side, size, path):
    """One side's system calls in one copy of SIZE bytes (strace -c -f: a table ending in a "total"
    row): the total, and each call's count in "detail" ("name n, ..."), most first."""
    calls = {}
    for line in read(path).splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[3].isdigit() and re.fullmatch(r"[0-9.]+", fields[0]):
            calls[fields[-1]] = int(fields[3])
    total = calls.pop("total", None)
    row = {k: "" for k in COLUMNS}
    row.update({"provider": provider, "transport": "strace " + transport, "bytes": size, "ok": int(total is not None),
                "value": total if total is not None else "", "unit": side,
                "detail": ", ".join(f"{name} {n}" for name, n in sorted(calls.items(), key=lambda c: -c[1])),
                "error": "" if total is not None else "no strace -c table"})
    return row


def per_mib(small, large):
    """From the strace rows of one side at two sizes: (calls per MiB of the file, calls of the start and
    the connection, [(call, per MiB)] of the four that grow most). One size: everything per MiB."""
    def counts(row):
        return {name: int(n) for name, n in (part.rsplit(" ", 1) for part in row["detail"].split(", ") if part)}
    if large is None or int(large["bytes"]) == int(small["bytes"]):
        mib = int(small["bytes"]) / MIB
        grow = {name: n / mib for name, n in counts(small).items()}
        return float(small["value"]) / mib, None, sorted(grow.items(), key=lambda c: -c[1])[:4]
    mib = (int(large["bytes"]) - int(small["bytes"])) / MIB
    a, b = counts(small), counts(large)
    grow = {name: (b.get(name, 0) - a.get(name, 0)) / mib for name in set(a) | set(b)}
    rate = (float(large["value"]) - float(small["value"])) / mib
    fixed = float(small["value"]) - rate * int(small["bytes"]) / MIB
    return rate, fixed, [c for c in sorted(grow.items(), key=lambda c: -c[1])[:4] if c[1] > 0]


def append(path, row):
    with open(path, "a", newline="") as f:
        csv.DictWriter(f, COLUMNS).writerow(row)


def spread(values):
    """"min / median / max" of VALUES (one figure if one run)."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def levels_of(rows):
    """The loss levels in order: 0 first, by percentage, burst last."""
    found = {r["loss"] for r in rows}
    return sorted(found, key=lambda v: (v == "burst", float(v) if v != "burst" else 0))


def series_of(rows):
    """[(provider, transport)] of the copies, in order: RDMA on each provider, then TCP."""
    return sorted({(r["provider"], r["transport"]) for r in rows if r["transport"] in ("rdma", "tcp")},
                  key=lambda s: (s[1] == "tcp", s[0]))


def name_of(provider, transport):
    return "TCP" if transport == "tcp" else {"rxe": "RoCE (rxe)", "siw": "iWARP (siw)"}.get(provider, provider)


def packets(row):
    """The packets both hosts sent in a copy: rxe's count on RoCE, TCP's segments otherwise; None if unknown."""
    if row["transport"] == "rdma" and row["provider"] == "rxe":
        return num(row["rxe_sent_pkts"])
    a, b = num(row["tcp_out_a"]), num(row["tcp_out_b"])
    return a + b if a is not None and b is not None else None


def table(rows):
    """The report's lines, and {series name: {loss: median MiB/s}} for the plot."""
    copies = [r for r in rows if r["transport"] in ("rdma", "tcp")]
    levels = levels_of(copies)
    lines = ["The same file, host B to host A: MiB/s from the sender's start to the verdict (min / median / max",
             "of the runs that finished), the median as a share of the same transport's on a clean link; then",
             "medians, both hosts summed: the CPU seconds both VMs spent per GiB; the packets both sent per MiB",
             "of the file (rxe's sent_pkts on RoCE; TCP's OutSegs on TCP and on iWARP, which runs over it);",
             "TCP's retransmitted segments; rxe's sequence errors (rcvd_seq_err: a responder saw a gap and sent",
             "a NAK) and retries (completer_retry_err: a requester went back to resend, after a NAK or a timeout);",
             "the longest stall of each copy (the longest time host A saw no full-size packet from host B between",
             "the first and the last), min / median / max.",
             ""]
    head = f"{'transport':<12} {'loss %':>6} {'ok':>5} {'MiB/s':>22} {'share':>6} {'CPU s/GiB':>10} {'pkts/MiB':>9} " \
           f"{'TCP rtx':>8} {'seq err':>8} {'retries':>8} {'stall ms':>22}"
    lines += [head, "-" * len(head)]
    plot = {}
    for provider, transport in series_of(copies):
        name = name_of(provider, transport)
        base = None
        for level in levels:
            runs = [r for r in copies if (r["provider"], r["transport"], r["loss"]) == (provider, transport, level)]
            if not runs:
                continue
            good = [r for r in runs if r["ok"] == "1" and num(r["seconds"])]
            rates = [int(r["bytes"]) / MIB / float(r["seconds"]) for r in good]
            median = statistics.median(rates) if rates else None
            if level == "0" and median:
                base = median
            share = f"{median / base:.2f}" if median and base else "-"
            cpu = [(num(r["cpu_a"]) + num(r["cpu_b"])) / (int(r["bytes"]) / GIB) for r in good
                   if num(r["cpu_a"]) is not None and num(r["cpu_b"]) is not None]

            def med(column):
                values = [num(r[column]) for r in good if num(r[column]) is not None]
                return f"{statistics.median(values):.0f}" if values else "-"
            rtx = [num(r["tcp_retrans_a"]) + num(r["tcp_retrans_b"]) for r in good
                   if num(r["tcp_retrans_a"]) is not None and num(r["tcp_retrans_b"]) is not None]
            pkts = [packets(r) / (int(r["bytes"]) / MIB) for r in good if packets(r) is not None]
            lines.append(f"{name:<12} {level:>6} {len(good):>2}/{len(runs):<2} {spread(rates):>22} {share:>6} "
                         f"{(f'{statistics.median(cpu):.1f}' if cpu else '-'):>10} "
                         f"{(f'{statistics.median(pkts):.0f}' if pkts else '-'):>9} "
                         f"{(f'{statistics.median(rtx):.0f}' if rtx else '-'):>8} {med('rxe_rcvd_seq_err'):>8} "
                         f"{med('rxe_completer_retry_err'):>8} "
                         f"{spread([1000 * s for s in (num(r.get('stall')) for r in good) if s is not None]):>22}")
            plot.setdefault(name, {})[level] = median
            for r in runs:
                if r["ok"] != "1":
                    lines.append(f"{'':<12} {'':>6}   failed (round {r['round']}): {r['error']}")
    refs = [r for r in rows if r["transport"].startswith(("qperf", "rdma_bench"))]
    if refs:
        lines += ["", "On a clean link: qperf, the same tool over each transport (bandwidth: 1 MB messages, MB/s;",
                  "latency: 64 bytes, one way, half the round trip, us; its RDMA tests polling the CQ (-P 1) or",
                  "waiting on a completion channel (-P 0)), and rdma_bench's 64-byte SEND ping-pong (median, us):"]
        for key in sorted({(r["provider"], r["transport"]) for r in refs}, key=lambda k: ("tcp_" not in k[1], k)):
            runs = [r for r in refs if (r["provider"], r["transport"]) == key]
            values = [num(r["value"]) for r in runs if r["ok"] == "1" and num(r["value"]) is not None]
            unit = next((r["unit"] for r in runs if r["unit"]), "")
            where = "TCP" if "tcp_" in key[1] else name_of(key[0], "rdma")
            shown = f"{spread(values)} {unit}" if values else "refused: " + next((r["error"] for r in runs), "")
            lines.append(f"  {key[1]:<28} {where:<12} {shown}")
    traced = [r for r in rows if r["transport"].startswith("strace") and r["ok"] == "1"]
    if traced:
        lines += ["", "System calls, one copy on a clean link under strace -c -f at two file sizes: per MiB of the file",
                  "(the difference between the two), those of the start and the connection (what the first copy",
                  "made beyond its MiB), and the calls that grow with the file, per MiB:"]
        for key in sorted({(r["provider"], r["transport"], r["unit"]) for r in traced},
                          key=lambda k: (k[1] == "strace tcp", k)):
            sizes = sorted((r for r in traced if (r["provider"], r["transport"], r["unit"]) == key),
                           key=lambda r: int(r["bytes"]))
            rate, fixed, grow = per_mib(sizes[0], sizes[-1] if len(sizes) > 1 else None)
            where = name_of(key[0], key[1][len("strace "):])
            lines.append(f"  {where:<12} {key[2]:<8} {rate:>7.1f}/MiB {('%6.0f' % fixed) if fixed is not None else '     -'} "
                         f"at the start   " + ", ".join(f"{name} {n:.1f}" for name, n in grow))
    return lines, plot, levels


def main():
    if sys.argv[1:2] == ["--start"] and len(sys.argv) == 3:
        with open(sys.argv[2], "w", newline="") as f:
            csv.DictWriter(f, COLUMNS).writeheader()
        return 0
    if sys.argv[1:2] == ["--add"] and len(sys.argv) == 11:
        append(sys.argv[2], copy_row(*sys.argv[3:]))
        return 0
    if sys.argv[1:2] == ["--add-bench"] and len(sys.argv) == 6:
        append(sys.argv[2], bench_row(*sys.argv[3:]))
        return 0
    if sys.argv[1:2] == ["--add-strace"] and len(sys.argv) == 8:
        append(sys.argv[2], strace_row(*sys.argv[3:]))
        return 0
    if sys.argv[1:2] == ["--add-qperf"] and len(sys.argv) == 6:
        append(sys.argv[2], qperf_row(*sys.argv[3:]))
        return 0
    if len(sys.argv) != 2:
        print("usage: bench_tcp.py DIR (with DIR/results.csv); see the docstring", file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    try:
        with open(os.path.join(outdir, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"bench_tcp.py: no results in {outdir}: {e.strerror} (run ./lab bench-tcp first)", file=sys.stderr)
        return 1
    lines, plot, levels = table(rows)
    text = setup_text(outdir) + "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    series = [(name, [(i, by_level.get(level)) for i, level in enumerate(levels)]) for name, by_level in plot.items()]
    svg_chart(os.path.join(outdir, "goodput.svg"), "The same file over RDMA and TCP, by packet loss",
              "packets lost on each host's link (%)", "MiB/s (median)", series, categorical=levels)
    print(text, end="")
    print(f"\nwrote {outdir}/results.csv (every run), table.txt and goodput.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
