#!/usr/bin/env python3
"""tests/stress/test_tally.py: the accounting of stress (tally.py) on made-up runs: the table's rows,
the TAP lines with what a failed run's folder says, the total and the exit status."""
import os
import subprocess
import sys
import tempfile
import unittest

TALLY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tally.py")


def tally(*args):
    return subprocess.run([sys.executable, TALLY, *args], capture_output=True, text=True)


class Tally(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.out = self.tmp.name

    def runs(self, *lines):
        with open(os.path.join(self.out, "results.txt"), "a") as f:
            for line in lines:
                f.write("\t".join(line) + "\n")

    def failed_run(self, name, files):
        """A failed run's folder NAME in the output, holding FILES (name: text); its path."""
        folder = os.path.join(self.out, name)
        os.makedirs(folder)
        for file, text in files.items():
            with open(os.path.join(folder, file), "w") as f:
                f.write(text)
        return folder

    def test_runs_with_a_failure(self):
        failed = self.failed_run("write-files-2", {
            "run.txt": "first=req delay_ms=5 exit=1\n",
            "requester0.out": "step 1: x\nrequester: step 4 failed: boom\nhint: start it\n"})
        self.runs(("write", "files", "PASS", "120", "req-first", "/x/1"),
                  ("write", "files", "FAIL", "300", "resp-first", failed),
                  ("write", "files", "PASS", "200", "req-first", "/x/3"),
                  ("write", "cm", "PASS", "90", "resp-first", "/x/4"))
        self.assertEqual(tally("head", self.out).returncode, 0)
        row = tally("row", self.out, "write", "files", "1", "--tap")
        self.assertEqual(row.stdout, "not ok 1 - write (files): 1 of 3 run(s) failed\n"
                         f"# {failed}: first=req delay_ms=5 exit=1\n"
                         "#   requester: step 4 failed: boom\n#   hint: start it\n")
        self.assertEqual(tally("row", self.out, "write", "cm", "2", "--tap").stdout,
                         "ok 2 - write (cm): 1 run(s) passed\n")
        summary = tally("summary", self.out, "3", "42")
        self.assertEqual(summary.returncode, 1)
        self.assertEqual(summary.stdout,
                         "pair                     flow    runs  passed  failed  req-first median_ms    max_ms\n"
                         "write                    files      3       2       1          2       200       300\n"
                         "write                    cm         1       1       0          0        90        90\n"
                         "\n3 of 4 runs passed (seed 42; replay: tests/stress/stress 3 --seed 42)\n")

    def test_a_run_the_watchdog_ended_says_so(self):
        failed = self.failed_run("file_transfer-cm-req-2", {
            "run.txt": "victim=req step=2 survivor_exit=137 survivor_ms=19000\n",
            "watchdog.txt": "the watchdog killed pids 41 (SIGKILL): still running 19 s after it began\n"})
        self.runs(("file_transfer", "cm", "FAIL", "19000", "req step 2", failed))
        row = tally("row", self.out, "file_transfer", "cm", "1", "--kill", "--tap")
        self.assertEqual(row.stdout, "not ok 1 - file_transfer (cm): 1 of 1 run(s) failed\n"
                         f"# {failed}: victim=req step=2 survivor_exit=137 survivor_ms=19000\n"
                         "#   the watchdog killed pids 41 (SIGKILL): still running 19 s after it began\n")

    def test_serve_is_the_same_commands_in_one_process(self):
        self.runs(("write", "files", "PASS", "120", "req-first", "/x/1"),
                  ("write", "files", "FAIL", "300", "resp-first", "/x/2"),
                  ("write", "cm", "PASS", "90", "resp-first", "/x/4"))
        alone = [tally("head", self.out), tally("row", self.out, "write", "files", "1", "--tap"),
                 tally("row", self.out, "write", "cm", "2", "--tap"), tally("summary", self.out, "3", "42", "--tap")]
        served = subprocess.run([sys.executable, TALLY, "serve", self.out, "--tap"], capture_output=True, text=True,
                                input="head\nrow write files 1\nrow write cm 2\nsummary 3 42\n")
        self.assertEqual(served.stdout, "".join(r.stdout for r in alone))
        self.assertEqual(served.returncode, 1)
        bad = subprocess.run([sys.executable, TALLY, "serve", self.out], capture_output=True, text=True,
                             input="row write\n")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("not a command: 'row write'", bad.stderr)

    def test_kills_leave_the_reference_run_out_of_the_times(self):
        self.runs(("send_receive", "cm", "PASS", "5000", "reference", "/x/r"),
                  ("send_receive", "cm", "PASS", "40", "kill-resp-3", "/x/a"),
                  ("send_receive", "cm", "PASS", "2100", "kill-req-5", "/x/b"))
        tally("head", self.out, "--kill")
        self.assertEqual(tally("row", self.out, "send_receive", "cm", "1", "--kill", "--tap").stdout,
                         "ok 1 - send_receive (cm): 3 run(s) passed, one per side and step killed\n")
        summary = tally("summary", self.out, "50", "7", "--kill", "--tap")
        self.assertEqual(summary.returncode, 0)
        self.assertEqual(summary.stdout,
                         "# pair                     flow    runs  passed  failed      kills median_ms    max_ms\n"
                         "# send_receive             cm         3       3       0          2        40      2100\n"
                         "# \n# 3 of 3 runs passed\n")


if __name__ == "__main__":
    unittest.main()
