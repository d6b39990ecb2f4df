#!/usr/bin/env python3
"""tests/test_summarize.py: what tests/summarize keeps of a failed case's diagnostics (its first lines,
the VM's own lines and the last lines past the cut) and how it counts a Meson test log's cases."""
import importlib.machinery
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("summarize", os.path.join(HERE, "summarize"))
spec = importlib.util.spec_from_loader("summarize", loader)
summarize = importlib.util.module_from_spec(spec)
loader.exec_module(summarize)


def failed_case(diagnostics):
    """A Bats run whose first case failed with DIAGNOSTICS ("# " lines) and whose second passed."""
    return ["1..2", "not ok 1 a case"] + diagnostics + ["ok 2 another case"]


class Diagnostics(unittest.TestCase):
    def test_a_short_failure_is_kept_whole(self):
        lines = ["# (in test file x.bats, line 3)", "#   `false' failed", "#"]
        self.assertEqual(summarize.diagnostics(failed_case(lines), 1), lines)

    def test_a_long_failure_keeps_its_first_lines_and_its_last_words(self):
        head = [f"# line {i}" for i in range(summarize.DIAGNOSTIC_LINES)]
        middle = [f"#   output {i}" for i in range(20)]
        last = ["#   receiver: step 2 failed: timed out", "#   hint: start the sender", "# --", "#"]
        kept = summarize.diagnostics(failed_case(head + middle + last), 1)
        self.assertEqual(kept[: len(head)], head)
        self.assertEqual(kept[len(head)], "# ... (19 more lines in the test log; the last ones:)")
        # the last five lines that say something; Bats' bare "# --" and "#" are not among them
        self.assertEqual(kept[len(head) + 1 :], middle[-3:] + last[:2])

    def test_the_vms_lines_past_the_cut_are_kept_with_the_last_ones(self):
        head = [f"# line {i}" for i in range(summarize.DIAGNOSTIC_LINES)]
        vm = "#   vm:   212 rogue S hrtimer_nanosleep < common_nsleep"
        rest = ["#   a"] + [vm] + [f"#   b {i}" for i in range(10)]
        kept = summarize.diagnostics(failed_case(head + rest), 1)
        self.assertIn("the VM's and the last ones:", kept[len(head)])
        self.assertEqual(kept[len(head) + 1 :], [vm] + rest[-5:])

    def test_a_failure_just_past_the_cut_loses_nothing(self):
        lines = [f"# line {i}" for i in range(summarize.DIAGNOSTIC_LINES + 3)]
        self.assertEqual(summarize.diagnostics(failed_case(lines), 1), lines)


class Count(unittest.TestCase):
    def test_cases_of_bats_and_googletest_and_a_suite_that_crashed(self):
        records = [
            {"name": "bats", "result": "FAIL", "stdout": "\n".join(failed_case(["# why"]))},
            {"name": "gtest", "result": "OK", "stdout": "[       OK ] A.B (1 ms)\n[       OK ] A.C (1 ms)"},
            {"name": "crash", "result": "TIMEOUT", "returncode": -15, "stdout": ""},
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("\n".join(json.dumps(r) for r in records) + "\n")
        try:
            passed, failed, failures = summarize.count(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual((passed, failed), (3, 2))
        self.assertEqual(failures[0], ("bats: not ok 1 a case", ["# why"]))
        self.assertEqual(failures[1][0], "crash: crash: TIMEOUT (exit status -15)")


if __name__ == "__main__":
    unittest.main()
