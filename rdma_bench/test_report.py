#!/usr/bin/env python3
"""rdma_bench/test_report.py: report.py reads perftest's and rdma_bench's output as bench did in shell.

The saved outputs are in rdma_bench/testdata/: real runs of `./lab bench --quick --pairs 1` in the
Soft-RoCE VM (perftest's rows hold tabs), and a perftest client that found no server. Run by meson test (suite unit), or by itself.
"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def saved(name):
    with open(os.path.join(HERE, "testdata", name)) as f:
        return f.read()


class CsvLine(unittest.TestCase):
    def line(self, tool, test, name, knob="", value=""):
        return report.csv_line(tool, test, "64", "500", "1", knob, value, saved(name))

    def test_each_tool_and_mode_takes_its_columns(self):
        # perftest: the average bandwidth and the message rate; min, typical, the percentiles and max.
        # rdma_bench: the same measurements and its CPU time per operation.
        for tool, test, name, knob, value, expected in [
            ("perftest", "write_bw", "perftest_write_bw.txt", "", "", "0.01,0.003952,,,,,,"),
            ("perftest", "write_lat", "perftest_write_lat.txt", "", "", ",,319.19,2380.78,6515.29,6515.29,6515.29,"),
            ("perftest", "atomic_lat", "perftest_atomic_lat.txt", "", "", ",,13.06,13.20,68.66,68.66,68.66,"),
            ("ours", "write_bw", "ours_write_bw.txt", "tx-depth", "4", "0.10,0.053673,,,,,,21.800"),
            ("ours", "send_lat", "ours_send_lat.txt", "", "", ",,336.40,1998.44,3723.51,3723.51,3723.51,3988.620"),
        ]:
            with self.subTest(name):
                self.assertEqual(self.line(tool, test, name, knob, value),
                                 f"{tool},{test},64,500,1,{knob},{value},{expected}")

    def test_no_numeric_row_is_no_result(self):
        self.assertIsNone(self.line("perftest", "atomic_bw", "perftest_failed.txt"))

    def test_the_last_numeric_row_counts(self):
        text = " 2 10 1.0 2.0 0.5\n 2 10 3.0 4.0 0.25\n"
        self.assertEqual(report.csv_line("perftest", "send_bw", "2", "10", "1", "", "", text),
                         "perftest,send_bw,2,10,1,,,4.0,0.25,,,,,,")


class AddRun(unittest.TestCase):
    def test_start_then_add_writes_the_header_and_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.csv")
            sys.argv = ["report.py", "--start", path]
            self.assertEqual(report.main(), 0)
            status = report.add_run(path, "ours", "write_bw", "4096", "1000", "2", "", "",
                                    os.path.join(HERE, "testdata", "ours_write_bw.txt"))
            self.assertEqual(status, 0)
            with open(path) as f:
                self.assertEqual(f.read(), report.CSV_HEADER + "\nours,write_bw,4096,1000,2,,,0.10,0.053673,,,,,,21.800\n")
            rows = report.load(path)
            self.assertEqual(rows[0]["bw_MBps"], "0.10")
            self.assertEqual(rows[0]["cpu_us_per_op"], "21.800")


if __name__ == "__main__":
    unittest.main()
