#!/usr/bin/env python3
"""rdma_bench/support/test_report.py: report.py reads perftest's and rdma_bench's output, and judges them.

The saved outputs are in rdma_bench/support/testdata/: real runs of `./lab bench --quick --pairs 1` and of
`./lab bench --qps` (the *_q4 files: -q 4) in the Soft-RoCE VM (perftest's rows hold tabs), and a
perftest client that found no server. Run by meson test (suite unit), or by itself.
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
        return report.csv_line(tool, test, "64", "500", "1", knob, value, "busy", "1", saved(name))

    def test_each_tool_and_mode_takes_its_columns(self):
        # perftest: what it really used (inline, CQ moderation), the average bandwidth and the message
        # rate; min, typical, the percentiles and max. rdma_bench: the same, and its user and system
        # time per operation.
        for tool, test, name, knob, value, expected in [
            ("perftest", "write_bw", "perftest_write_bw.txt", "", "", "0,50,1,0.01,0.003952,,,,,,,"),
            ("perftest", "write_lat", "perftest_write_lat.txt", "", "", "0,,1,,,319.19,2380.78,6515.29,6515.29,6515.29,,"),
            ("perftest", "atomic_lat", "perftest_atomic_lat.txt", "", "", ",,1,,,13.06,13.20,68.66,68.66,68.66,,"),
            ("ours", "write_bw", "ours_write_bw.txt", "tx-depth", "4", "0,100,1,0.10,0.054153,,,,,,11.320,9.700"),
            ("ours", "send_lat", "ours_send_lat.txt", "", "", "0,1,1,,,1772.16,1999.19,8175.09,8175.09,8175.09,4108.560,123.440"),
        ]:
            with self.subTest(name):
                self.assertEqual(self.line(tool, test, name, knob, value),
                                 f"{tool},{test},64,500,1,{knob},{value},busy,1,{expected},") # (no API given)

    def test_a_nan_standard_deviation_still_gives_the_row(self):
        self.assertEqual(self.line("perftest", "write_lat", "perftest_write_lat_nan.txt"),
                         "perftest,write_lat,64,500,1,,,busy,1,0,,1,,,344.36,2893.96,8880.31,217915.19,217915.19,,,")

    def test_no_numeric_row_is_no_result(self):
        self.assertIsNone(self.line("perftest", "atomic_bw", "perftest_failed.txt"))

    def test_the_last_numeric_row_counts(self):
        text = " 2 10 1.0 2.0 0.5\n 2 10 3.0 4.0 0.25\n"
        self.assertEqual(report.csv_line("perftest", "send_bw", "2", "10", "1", "", "", "events", "0", text),
                         "perftest,send_bw,2,10,1,,,events,0,,,1,4.0,0.25,,,,,,,,")

    def test_the_queue_pairs_are_read_from_each_tools_log(self):
        # ib_write_bw -q 4 prints "Number of qps : 4" and one row for all four QPs (1200 = 4 x 300);
        # rdma_bench -q 4 says "4 QPs" in its step 3.
        self.assertEqual(report.settings("perftest", saved("perftest_write_bw_q4.txt")), ("0", "100", "4"))
        self.assertEqual(report.settings("ours", saved("ours_write_bw_q4.txt")), ("0", "100", "4"))
        self.assertEqual(report.csv_line("perftest", "write_bw", "65536", "300", "1", "", "", "busy", "1",
                                         saved("perftest_write_bw_q4.txt")),
                         "perftest,write_bw,65536,300,1,,,busy,1,0,100,4,186.29,0.002981,,,,,,,,")
        self.assertEqual(report.csv_line("ours", "write_bw", "65536", "300", "1", "", "", "busy", "1",
                                         saved("ours_write_bw_q4.txt")),
                         "ours,write_bw,65536,300,1,,,busy,1,0,100,4,178.68,0.002859,,,,,,0.000,349.522,")

    def test_perftest_inline_size_is_read_from_its_log(self):
        # rxe is a device perftest does not recognise: it disables inline, whatever -I said.
        self.assertEqual(report.settings("perftest", saved("perftest_write_lat.txt")), ("0", "", "1"))
        self.assertEqual(report.settings("perftest", saved("perftest_failed.txt")), ("", "", "1"))


class Verdict(unittest.TestCase):
    def test_within_five_percent_with_a_tight_spread_is_same(self):
        ratio, lo, hi, say = report.verdict([1.00, 1.01, 0.99], [1.02, 1.01, 1.00])
        self.assertAlmostEqual(ratio, 1.01 / 1.00)
        self.assertEqual(say, "same")
        self.assertTrue(0.95 <= lo <= hi <= 1.05)

    def test_far_above_or_below_is_differs_both_ways(self):
        # Faster is not "met": 3x the other tool's rate means the two did not do the same work.
        self.assertEqual(report.verdict([1.0, 1.0, 1.0], [3.2, 3.1, 3.3])[3], "DIFFERS")
        self.assertEqual(report.verdict([1.0, 1.0, 1.0], [0.7, 0.8, 0.75])[3], "DIFFERS")

    def test_a_spread_that_straddles_the_target_is_noise(self):
        # The medians agree, but one pairing of runs is 1.7x apart: not evidence of "same".
        self.assertEqual(report.verdict([0.0336, 0.0537, 0.0569], [0.054, 0.055, 0.056])[3], "noise")
        # The medians are 10% apart, but the runs overlap the target: not evidence of "DIFFERS".
        self.assertEqual(report.verdict([1.0, 1.0, 1.0], [1.0, 1.1, 1.2])[3], "noise")

    def test_fewer_than_three_runs_get_no_verdict(self):
        self.assertEqual(report.verdict([1.0], [1.0])[3], "too few runs (<3)")
        self.assertEqual(report.verdict([], [1.0])[3], "n/a")

    def test_spread_is_min_median_max(self):
        self.assertEqual(report.spread([3.0, 1.0, 2.0, 10.0]), (1.0, 2.5, 10.0))
        self.assertIsNone(report.spread([]))

    def test_small_sizes_are_judged_by_message_rate(self):
        self.assertEqual(report.metric("write_bw", 2), ("Mmsg/s", "rate_Mmsgps"))
        self.assertEqual(report.metric("write_bw", 65536), ("MB/s", "bw_MBps"))
        self.assertEqual(report.metric("send_lat", 2), ("median us", "lat_median_us"))


class Table(unittest.TestCase):
    def rows(self, tool, test, wait, vals, inline="0"):
        return [dict(tool=tool, test=test, size="2", knob="", value="", wait=wait, inline=inline, cq_mod="1",
                     lat_median_us=str(v), rate_Mmsgps="", bw_MBps="") for v in vals]

    def test_a_row_shows_both_spreads_the_ratio_and_what_each_tool_used(self):
        rows = (self.rows("perftest", "send_lat", "events", [50, 52, 51]) +
                self.rows("ours", "send_lat", "events", [51, 50, 52]) +
                self.rows("perftest", "send_lat", "busy", [2000, 2000, 1999]) +
                self.rows("ours", "send_lat", "busy", [1998, 1999, 2000]))
        lines, summary = report.table(rows, tcg=True)
        self.assertRegex(lines[2], r"^send_lat +2 busy\* +median us +1999/2000/2000 +1998/1999/2000 +1\.00 +1\.00-1\.00 +same ")
        self.assertRegex(lines[3], r"^send_lat +2 events +median us +50/51/52 +50/51/52 +1\.00 +0\.96-1\.04 +same +3  0,1\|0,1$")
        self.assertIn("vCPU", lines[-1])
        self.assertEqual(summary[1][-2], "same")
        self.assertEqual(summary[1][-1], "") # (rows from before the API column)

    def test_each_posting_api_is_a_point_of_its_own(self):
        rows = []
        for api, theirs, ours in (("classic", [50, 51, 52], [50, 51, 52]), ("extended", [40, 41, 42], [50, 51, 52])):
            for r in self.rows("perftest", "send_lat", "busy", theirs) + self.rows("ours", "send_lat", "busy", ours):
                r["api"] = api
                rows.append(r)
        lines, summary = report.table(rows)
        self.assertRegex(lines[2], r"^send_lat +2 busy +median us +50/51/52 +50/51/52 +1\.00 .* same ")
        self.assertRegex(lines[3], r"^send_lat ext +2 busy +median us +40/41/42 +50/51/52 +1\.24 .* DIFFERS ")
        self.assertIn("ext: both tools posted with the extended API", lines[-1])
        self.assertEqual([row[-1] for row in summary], ["classic", "extended"])

    def test_busy_ping_pongs_are_marked_on_single_threaded_tcg_only(self):
        self.assertTrue(report.single_tcg("# Soft-RoCE (rdma_rxe on lo) in a QEMU TCG VM with 2 vCPUs\n"))
        self.assertTrue(report.single_tcg("# Soft-RoCE (rdma_rxe on lo) in a QEMU VM with 2 vCPUs, single-threaded TCG\n"))
        self.assertFalse(report.single_tcg("# Soft-RoCE (rdma_rxe on lo) in a QEMU VM with 2 vCPUs, multi-threaded TCG\n"))
        self.assertFalse(report.single_tcg("# native device mlx5_0\n"))


    def test_runs_on_several_queue_pairs_are_a_point_of_their_own(self):
        def runs(tool, qps, vals):
            return [dict(tool=tool, test="write_bw", size="65536", knob="", value="", wait="busy", inline="0",
                         cq_mod="100", qps=qps, bw_MBps=str(v), rate_Mmsgps="", lat_median_us="") for v in vals]
        rows = (runs("perftest", "1", [180, 181, 182]) + runs("ours", "1", [181, 182, 183]) +
                runs("perftest", "4", [100, 101, 102]) + runs("ours", "4", [101, 100, 102]))
        for r in rows[:6]:
            del r["qps"] # (a results.csv from before the column: one QP)
        lines, summary = report.table(rows, tcg=True)
        self.assertRegex(lines[2], r"^write_bw +65536 busy +MB/s +180/181/182 +181/182/183 +1\.01 ")
        self.assertRegex(lines[3], r"^write_bw -q4 +65536 busy +MB/s +100/101/102 +100/101/102 +1\.00 ")
        self.assertEqual(len(lines), 4) # (no ping-pong: no footnote)
        self.assertEqual([row[3] for row in summary], [1, 4])


class Counts(unittest.TestCase):
    def test_callgrind_and_strace_totals(self):
        # Real outputs (of /bin/true under callgrind, of ls under strace -f -c).
        self.assertEqual(report.count_of("instructions", saved("callgrind_true.log")), 129814)
        self.assertEqual(report.count_of("syscalls", saved("strace_c_ls.txt")), 144)
        self.assertIsNone(report.count_of("syscalls", saved("perftest_failed.txt")))

    def test_per_operation_is_the_difference_over_the_extra_iterations(self):
        rows = [dict(api="classic", tool="ours", test="read_lat", size="2", wait="busy", counter="instructions",
                     iters=i, count=c) for i, c in (("100", "1000000"), ("300", "1140000"))]
        self.assertEqual(report.per_operation(rows)[("read_lat", 2, "busy", "classic")][("ours", "instructions")], 700)
        rows += [dict(api="classic", tool="perftest", test="read_lat", size="2", wait="busy", counter="instructions",
                      iters=i, count=c) for i, c in (("100", "2000000"), ("300", "2131400"))]
        lines = report.profile_table(rows)
        self.assertRegex(lines[2], r"^read_lat +2 busy +classic +657 +700 +1\.07  MISSED 1\.07")
        rows += [dict(api="classic", tool="perftest", test="send_lat", size="2", wait="events", counter="instructions",
                      iters=i, count=c) for i, c in (("100", "2000000"), ("300", "1968114"))]
        rows += [dict(api="classic", tool="ours", test="send_lat", size="2", wait="events", counter="instructions",
                      iters=i, count=c) for i, c in (("100", "1000000"), ("300", "1281000"))]
        self.assertRegex(report.profile_table(rows)[3], r"^send_lat +2 events +classic +-159\.43 +1405 +-  unsteady")

    def test_each_api_is_a_row_of_its_own_and_an_old_profile_is_mixed(self):
        rows = [dict(api=api, tool=tool, test="write_bw", size="64", wait="busy", counter="instructions", iters=i,
                     count=str(int(i) * per)) for api, tool, per in (("classic", "perftest", 300), ("classic", "ours", 200),
                                                                   ("extended", "perftest", 250), ("extended", "ours", 150))
                for i in ("200", "2200")]
        lines = report.profile_table(rows)
        self.assertRegex(lines[2], r"^write_bw +64 busy +classic +300 +200 +0\.67  met")
        self.assertRegex(lines[3], r"^write_bw +64 busy +extended +250 +150 +0\.60  met")
        old = [dict(tool="ours", test="write_bw", size="64", wait="busy", counter="syscalls", iters=i, count=c)
               for i, c in (("200", "10"), ("2200", "10"))]
        self.assertIn(("write_bw", 64, "busy", "mixed"), report.per_operation(old))


class AddRun(unittest.TestCase):
    def test_start_then_add_writes_the_header_and_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.csv")
            sys.argv = ["report.py", "--start", path]
            self.assertEqual(report.main(), 0)
            status = report.add_run(path, "ours", "write_bw", "4096", "1000", "2", "", "", "busy", "0",
                                    os.path.join(HERE, "testdata", "ours_write_bw.txt"), "extended")
            self.assertEqual(status, 0)
            with open(path) as f:
                self.assertEqual(f.read(), report.CSV_HEADER +
                                 "\nours,write_bw,4096,1000,2,,,busy,0,0,100,1,0.10,0.054153,,,,,,11.320,9.700,extended\n")
            rows = report.load(path)
            self.assertEqual(rows[0]["bw_MBps"], "0.10")
            self.assertEqual(rows[0]["sys_us_per_op"], "9.700")
            self.assertEqual(rows[0]["api"], "extended")


if __name__ == "__main__":
    unittest.main()
