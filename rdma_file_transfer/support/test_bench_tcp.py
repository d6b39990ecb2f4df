#!/usr/bin/env python3
"""test_bench_tcp.py: bench_tcp.py's reading of the counters and the programs' output, and its report,
on made-up runs (no VM)."""
import csv
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_tcp  # noqa: E402

SNMP_HEAD = "/proc/net/snmp:Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails " \
            "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"


def snapshot(user, system, softirq, idle, out_segs, retrans, naks=0):
    return (f"/proc/stat:cpu  {user} 0 {system} {idle} 0 0 {softirq} 0 0 0\n/proc/stat:cpu0 1 2 3 4\n"
            f"/proc/stat:intr 12345\n{SNMP_HEAD}"
            f"/proc/net/snmp:Tcp: 1 200 120000 -1 3 2 0 0 1 100 {out_segs} {retrans} 0 0 0\n"
            f"/sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_seq_err:{naks}\n"
            f"/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts:{10 * naks}\n")


class Counters(unittest.TestCase):
    def test_a_snapshot(self):
        found = bench_tcp.counters(snapshot(150, 50, 20, 1000, 400, 7, 3))
        self.assertEqual(found["cpu_busy"], 2.2)  # user + system + softirq, in USER_HZ ticks
        self.assertEqual(found["cpu_sys"], 0.7)
        self.assertEqual((found["tcp_OutSegs"], found["tcp_RetransSegs"]), (400, 7))
        self.assertEqual((found["rcvd_seq_err"], found["sent_pkts"]), (3, 30))
        self.assertEqual(bench_tcp.counters("garbage\n/proc/stat:cpu x\n"), {})


class Rows(unittest.TestCase):
    def write(self, prefix, name, text):
        with open(f"{prefix}.{name}", "w") as f:
            f.write(text)

    def test_a_copy_that_finished_and_one_that_failed(self):
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "rxe-rdma-1-1")
            self.write(prefix, "sender", "step 5: ...\nsent 33554432 bytes in 2.50 s, 13.4 MB/s\n"
                       "Receiver's digest matches ours: ab\n")
            self.write(prefix, "receiver", "")
            self.write(prefix, "time", "3.20\n")
            self.write(prefix, "a0", snapshot(100, 100, 100, 0, 10, 0, 0))
            self.write(prefix, "a1", snapshot(200, 150, 300, 0, 10, 0, 4))
            self.write(prefix, "b0", snapshot(0, 0, 0, 0, 10, 1, 0))
            self.write(prefix, "b1", snapshot(100, 0, 0, 0, 30, 3, 1))
            row = bench_tcp.copy_row("rxe", "rdma", "1", "1", "33554432", "0", "0", prefix)
            self.assertEqual((row["ok"], row["seconds"], row["sent_seconds"]), (1, 3.2, 2.5))
            self.assertEqual((row["cpu_a"], row["cpu_b"], row["sys_a"]), (3.5, 1.0, 2.5))
            self.assertEqual((row["tcp_out_b"], row["tcp_retrans_b"], row["tcp_retrans_a"]), (20, 2, 0))
            self.assertEqual((row["rxe_rcvd_seq_err"], row["rxe_sent_pkts"]), (5, 50))
            self.assertEqual(row["error"], "")
            self.write(prefix, "sender", "sender: step 5 failed: the RDMA WRITE completed with "
                       "IBV_WC_RETRY_EXC_ERR\nhint: ...\n")
            row = bench_tcp.copy_row("rxe", "rdma", "5", "1", "33554432", "1", "1", prefix)
            self.assertEqual(row["ok"], 0)
            self.assertIn("IBV_WC_RETRY_EXC_ERR", row["error"])
            os.remove(prefix + ".a1")  # (a snapshot that could not be taken: no figure, not a wrong one)
            self.assertEqual(bench_tcp.copy_row("rxe", "rdma", "5", "1", "1", "0", "0", prefix)["cpu_a"], "")

    def test_the_capture(self):
        """The longest gap between the captured packets is the copy's stall, and tcpdump's own CPU time
        (its /proc/PID/stat in host A's snapshots) is taken out of host A's."""
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "rxe-tcp-1-1")
            self.write(prefix, "sender", "Receiver's digest matches ours: ab\n")
            self.write(prefix, "receiver", "")
            tcpdump = "/proc/4242/stat:4242 (tcp dump) S 1 4242 4242 0 -1 4194560 100 0 0 0 {} {} 0 0 20 0 1\n"
            self.write(prefix, "a0", snapshot(100, 100, 100, 0, 10, 0) + tcpdump.format(5, 5))
            self.write(prefix, "a1", snapshot(200, 150, 300, 0, 10, 0) + tcpdump.format(30, 20))
            self.write(prefix, "b0", snapshot(0, 0, 0, 0, 10, 1))
            self.write(prefix, "b1", snapshot(100, 0, 0, 0, 30, 3))
            # a pcap (microseconds, little-endian) of three 64-byte records at 1.0, 1.25 and 1.3 s
            records = b"".join(struct.pack("<IIII", 1, usec, 64, 1000) + bytes(64) for usec in (0, 250000, 300000))
            with open(prefix + ".pcap", "wb") as f:
                f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 64, 1) + records)
            row = bench_tcp.copy_row("rxe", "tcp", "1", "1", "1048576", "0", "0", prefix)
            self.assertEqual(row["stall"], 0.25)
            self.assertEqual(row["cpu_a"], 3.5 - 0.4)  # 40 ticks of tcpdump's out of 350
            os.remove(prefix + ".pcap")
            with open(prefix + ".pcap", "wb") as f:
                f.write(b"not a capture")
            self.assertEqual(bench_tcp.copy_row("rxe", "tcp", "1", "1", "1", "0", "0", prefix)["stall"], "")

    def test_strace(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s")
            self.write(path, "out", "% time     seconds  usecs/call     calls    errors syscall\n"
                       "------ ----------- ----------- --------- --------- ----------------\n"
                       " 60.00    0.000025          12       300           read\n"
                       " 30.00    0.000016           0       100           poll\n"
                       " 10.00    0.000016           0        20         2 openat\n"
                       "------ ----------- ----------- --------- --------- ----------------\n"
                       "100.00    0.000081           0       420         2 total\n")
            small = bench_tcp.strace_row("rxe", "tcp", "sender", str(4 << 20), path + ".out")
            self.assertEqual((small["value"], small["unit"], small["transport"]), (420, "sender", "strace tcp"))
            self.assertEqual(small["detail"], "read 300, poll 100, openat 20")
            self.assertEqual(bench_tcp.strace_row("rxe", "tcp", "sender", "1", path + ".none")["ok"], 0)
            # twice the file: 4 MiB more cost 200 reads and 40 polls more; the openat stayed
            large = dict(small, bytes=str(8 << 20), value="660", detail="read 500, poll 140, openat 20")
            rate, fixed, grow = bench_tcp.per_mib(small, large)
            self.assertEqual((rate, fixed, grow), (60.0, 180.0, [("read", 50.0), ("poll", 10.0)]))
            rate, fixed, grow = bench_tcp.per_mib(small, None)
            self.assertEqual((rate, fixed, grow[0]), (105.0, None, ("read", 75.0)))

    def test_rdma_bench(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "b")
            self.write(log, "out", "step 5: measure send latency\n     bytes  iterations    min_us median_us    p99_us\n"
                       "        64         200     40.10     52.30     90.00\nSample finished successfully\n")
            row = bench_tcp.bench_row("rxe", "send_lat events", log + ".out")
            self.assertEqual((row["value"], row["unit"], row["transport"]), (52.3, "us", "rdma_bench send_lat events"))
            self.write(log, "out", "step 4: connect\nrequester: step 4 failed: waiting for the server to accept: "
                       "got RDMA_CM_EVENT_CONNECT_ERROR (status -22)\nhint: ...\nSample finished with errors\n")
            row = bench_tcp.bench_row("siw", "send_lat busy", log + ".out")
            self.assertEqual(row["ok"], 0)  # the line that says why, not the last one
            self.assertIn("RDMA_CM_EVENT_CONNECT_ERROR (status -22)", row["error"])

    def test_qperf(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "q")
            self.write(log, "bw", "rc_bw:\n    bw  =  1.2 GB/sec\n")
            self.write(log, "lat", "tcp_lat:\n    latency  =  45.6 us\n")
            self.write(log, "none", "qperf: failed to connect\n")
            self.assertEqual(bench_tcp.qperf_row("rxe", "rc_bw", log + ".bw")["value"], 1200.0)
            row = bench_tcp.qperf_row("rxe", "tcp_lat", log + ".lat")
            self.assertEqual((row["value"], row["unit"], row["transport"]), (45.6, "us", "qperf tcp_lat"))
            row = bench_tcp.qperf_row("rxe", "rc_lat", log + ".none")
            self.assertEqual((row["ok"], row["error"]), (0, "qperf: failed to connect"))


class Report(unittest.TestCase):
    def test_the_table_and_the_plot(self):
        rows = []

        def copy(provider, transport, loss, seconds, ok=1, error=""):
            row = {k: "" for k in bench_tcp.COLUMNS}
            row.update({"provider": provider, "transport": transport, "loss": loss, "round": "1",
                        "bytes": str(32 << 20), "ok": str(ok), "seconds": str(seconds), "cpu_a": "1.0",
                        "cpu_b": "1.0", "tcp_retrans_a": "0", "tcp_retrans_b": "2", "error": error,
                        "rxe_sent_pkts": "32768", "tcp_out_a": "100", "tcp_out_b": "60"})
            rows.append(row)
        for s in (2, 4, 3):
            copy("rxe", "rdma", "0", s)
            copy("rxe", "tcp", "0", s / 2)
        copy("rxe", "rdma", "5", 30)
        copy("rxe", "rdma", "5", "", ok=0, error="sender: step 5 failed: retry")
        copy("rxe", "tcp", "5", 3)
        copy("rxe", "tcp", "burst", 4)
        rows.append(dict({k: "" for k in bench_tcp.COLUMNS}, provider="rxe", transport="strace tcp", ok="1",
                         bytes=str(1 << 20), value="100", unit="sender", detail="sendto 90, mmap 10"))  # (not a copy)
        rows.append(dict(rows[-1], bytes=str(2 << 20), value="120", detail="sendto 110, mmap 10"))
        rows.append(dict({k: "" for k in bench_tcp.COLUMNS}, provider="rxe", transport="qperf rc_bw -P 1", ok="0",
                         error="failed to create QP: Invalid argument"))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "results.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, bench_tcp.COLUMNS)
                w.writeheader()
                w.writerows(rows)
            out = subprocess.run([sys.executable, os.path.join(HERE, "bench_tcp.py"), d], capture_output=True,
                                 text=True, check=True).stdout
            self.assertTrue(os.path.exists(os.path.join(d, "goodput.svg")))
        lines = out.splitlines()
        rdma0 = next(line for line in lines if line.startswith("RoCE (rxe)") and " 0 " in line)
        self.assertIn("8.0 / 10.7 / 16.0", rdma0)  # 32 MiB in 4, 3 and 2 s
        self.assertIn("1.00", rdma0)
        self.assertIn(" 16.0 ", rdma0)  # 2 CPU seconds for 1/32 GiB
        self.assertIn(" 1024 ", rdma0)  # rxe's packets per MiB
        tcp0 = next(line for line in lines if line.startswith("TCP") and " 0 " in line)
        self.assertIn(" 5 ", tcp0)  # TCP's segments (160 for 32 MiB)
        rdma5 = next(line for line in lines if line.startswith("RoCE (rxe)") and " 5 " in line)
        self.assertIn("1/2", rdma5)
        self.assertIn("0.10", rdma5)  # 32/30 MiB/s against 10.67
        self.assertIn("failed (round 1): sender: step 5 failed: retry", out)
        self.assertIn("TCP          sender      20.0/MiB     80 at the start   sendto 20.0", out)
        self.assertIn("rc_bw -P 1", out)
        self.assertIn("refused: failed to create QP: Invalid argument", out)
        order = [line.split()[0] for line in lines if line.startswith(("RoCE ", "TCP "))]
        self.assertEqual(order, ["RoCE", "RoCE", "TCP", "TCP", "TCP"])  # burst after the percentages
        self.assertTrue(lines[[i for i, line in enumerate(lines) if line.startswith("TCP")][-1]].split()[1] == "burst")


if __name__ == "__main__":
    unittest.main()
