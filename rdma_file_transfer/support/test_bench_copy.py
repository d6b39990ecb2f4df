#!/usr/bin/env python3
"""rdma_file_transfer/support/test_bench_copy.py: bench_copy.py reads the logs of bench-copy's runs and makes
its table. The perftest row and the sender's last lines are from a real run in the Soft-RoCE VM. Run by
meson test (suite unit), or by itself.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_copy  # noqa: E402

PERFTEST = """ #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 1048576    256              88.17              24.17  \t\t   0.000024
---------------------------------------------------------------------------------------
"""
# rdma_bench's bandwidth table (its layout: bytes iterations MB/s Gb/s Mmsg/s user_us/op sys_us/op)
RDMA_BENCH = """     bytes  iterations        MB/s        Gb/s      Mmsg/s  user_us/op   sys_us/op
   1048576         256       31.25       0.262    0.000031       12.50      310.00
"""
SENDER_OK = ("sent 268435456 bytes in 20.48 s, 13.1 MB/s\nstep 8: disconnect (RDMA CM)\n"
             "Sample finished successfully\n")
SENDER_FAILED = "sender: step 6 failed: ...\nSample finished with errors\n"
MiB256 = str(256 << 20)


class Logs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def log(self, name, text, time=None):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        if time is not None:
            with open(path + ".time", "w") as f:
                f.write(time)
        return path

    def test_write_bw_is_perftests_average(self):
        line = bench_copy.csv_line("write_bw", "2", MiB256, self.log("w", PERFTEST))
        self.assertEqual(line, f"write_bw,2,{MiB256},10.592,24.17,,,,")

    def test_transfer_is_rdma_benchs_mb_per_s(self):
        line = bench_copy.csv_line("transfer", "1", MiB256, self.log("t", RDMA_BENCH))
        self.assertEqual(line, f"transfer,1,{MiB256},8.192,31.25,,,,")

    def test_a_stage_is_the_file_over_its_elapsed_time(self):
        line = bench_copy.csv_line("sha256", "1", MiB256, self.log("s", "SHA2-256(f)= 00\n", "5.12 5900\n"))
        self.assertEqual(line, f"sha256,1,{MiB256},5.120,50.00,,,,")

    def test_the_machines_cpu_time_is_kept(self):
        log = self.log("s", "SHA2-256(f)= 00\n", "5.12 5900\n")
        with open(log + ".cpu", "w") as f:
            f.write("531 100 2\n")
        line = bench_copy.csv_line("sha256", "1", MiB256, log)
        self.assertEqual(line, f"sha256,1,{MiB256},5.120,50.00,,,5.31,2")

    def test_a_copy_is_timed_by_its_sent_line_and_takes_both_sides_max_rss(self):
        sender = self.log("c", SENDER_OK, "21.33 14436\n")
        receiver = self.log("c.receiver", "...\nSample finished successfully\n", "21.34 12144\n")
        line = bench_copy.csv_line("copy", "1", MiB256, sender, receiver)
        self.assertEqual(line, f"copy,1,{MiB256},20.480,12.50,14436,12144,,")

    def test_no_result_is_none(self):
        self.assertIsNone(bench_copy.csv_line("write_bw", "1", MiB256, self.log("w", " Couldn't connect\n")))
        failed = self.log("c", SENDER_FAILED, "3.00 14000\n")
        self.assertIsNone(bench_copy.csv_line("copy", "1", MiB256, failed, failed))


class Table(unittest.TestCase):
    def rows(self):
        def row(stage, mibps, sender="", receiver="", size=MiB256, cpu_s=""):
            return {"stage": stage, "bytes": size, "MiBps": str(mibps), "sender_rss_kB": str(sender),
                    "receiver_rss_kB": str(receiver), "cpu_s": str(cpu_s), "cpus": "2" if cpu_s else ""}
        # CPU s per MiB: write_bw 0.05, sha256 0.02, disk 0.004: the copy's work 0.094, 2 CPUs: 21.3 MiB/s
        return [row("write_bw", 20, cpu_s=12.8), row("write_bw", 22, cpu_s=12.8), row("write_bw", 30, cpu_s=12.8),
                row("sha256", 50, cpu_s=5.12), row("disk", 250, cpu_s=1.024), row("copy", 11, cpu_s=40),
                row("memory", 19, 14492, 12148, str(64 << 20)), row("memory", 11, 14416, 12164, str(1 << 30))]

    def test_medians_the_slowest_stage_and_the_memory_rows(self):
        lines, stats, memory = bench_copy.table(self.rows())
        self.assertEqual(stats["write_bw"], (20.0, 22.0, 30.0, 3))
        self.assertIn("copy / slowest stage (write_bw): 0.50 (medians; target 0.50)", lines)
        # (these results have no rdma_bench transfer: perftest's write_bw stands in)
        self.assertIn("CPU bound: 2 CPUs / (2 x sha256 + write_bw + disk = 0.094 CPU s/MiB) = 21.3 MiB/s", lines)
        self.assertIn("copy / roofline: 0.52 (medians; roofline 21.3 MiB/s, the lower of the CPU bound and the "
                      "slowest stage; target 0.80)", lines)
        self.assertIn("64 MiB            14.2 MiB          11.9 MiB", lines)
        self.assertIn("1 GiB             14.1 MiB          11.9 MiB", lines)
        self.assertEqual(len(memory), 2)

    def test_the_roofline_takes_rdma_benchs_transfer_when_there_is_one(self):
        rows = self.rows()
        rows.append({"stage": "transfer", "bytes": MiB256, "MiBps": "40", "sender_rss_kB": "", "receiver_rss_kB": "",
                     "cpu_s": "7.68", "cpus": "2"})  # 0.03 CPU s/MiB: the work 0.074, 2 CPUs: 27.0 MiB/s
        lines, _, _ = bench_copy.table(rows)
        self.assertIn("CPU bound: 2 CPUs / (2 x sha256 + transfer + disk = 0.074 CPU s/MiB) = 27.0 MiB/s", lines)
        self.assertIn("copy / roofline: 0.41 (medians; roofline 27.0 MiB/s, the lower of the CPU bound and the "
                      "slowest stage; target 0.80)", lines)
        self.assertIn("copy / slowest stage (transfer): 0.28 (medians; target 0.50)", lines)

    def test_the_plots_are_written(self):
        with tempfile.TemporaryDirectory() as d:
            _, stats, memory = bench_copy.table(self.rows())
            self.assertEqual(bench_copy.plots(d, stats, memory), ["stages.svg", "memory.svg"])
            for name in ("stages.svg", "memory.svg"):
                with open(os.path.join(d, name)) as f:
                    self.assertTrue(f.read().startswith("<svg "))


if __name__ == "__main__":
    unittest.main()
