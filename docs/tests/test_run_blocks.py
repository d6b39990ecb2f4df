#!/usr/bin/env python3
"""docs/tests/test_run_blocks.py: how run-blocks compares a block's output with its expected block,
without a VM: the ordered match, the values it treats as variables, and a ladder's counters after a
resend."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load_run_blocks():
    loader = importlib.machinery.SourceFileLoader("run_blocks", os.path.join(HERE, "run-blocks"))
    spec = importlib.util.spec_from_loader("run_blocks", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


rb = load_run_blocks()

# Chapter 2's counters, as its expected block has them.
EXPECTED = """rxe counters that changed:
  host A rxe0/rcvd_pkts               +2
  host A rxe0/rdma_recvs              +1
  host A rxe0/sent_pkts               +2
  host B rxe0/rcvd_pkts               +2
  host B rxe0/rdma_sends              +1
  host B rxe0/sent_pkts               +2
"""

# The same run after a late ACK: host B resent the WRITE, host A answered the copy.
RESENT = """rxe counters that changed:
  host A rxe0/duplicate_request       +1
  host A rxe0/rcvd_pkts               +3
  host A rxe0/rdma_recvs              +1
  host A rxe0/sent_pkts               +3
  host B rxe0/completer_retry_err     +1
  host B rxe0/rcvd_pkts               +3
  host B rxe0/rdma_sends              +1
  host B rxe0/sent_pkts               +3
"""


class MissingLines(unittest.TestCase):
    def test_the_same_output_matches(self):
        self.assertEqual(rb.missing_lines(EXPECTED, EXPECTED), [])

    def test_lines_between_and_hex_values_vary(self):
        expected = "QPN 0x000011, state INIT\nSample finished successfully\n"
        output = "step 3\nQPN 0x00002a,   state INIT\nstep 4\nSample finished successfully\n"
        self.assertEqual(rb.missing_lines(expected, output), [])

    def test_order_counts(self):
        self.assertEqual(rb.missing_lines("b\na\n", "a\nb\n"), ["a"])

    def test_after_a_resend_the_packet_counts_may_differ(self):
        self.assertEqual(rb.missing_lines(EXPECTED, RESENT), [])

    def test_without_a_resend_a_packet_count_is_compared(self):
        more = RESENT.replace("  host A rxe0/duplicate_request       +1\n", "")
        more = more.replace("  host B rxe0/completer_retry_err     +1\n", "")
        self.assertEqual(rb.missing_lines(EXPECTED, more)[0], "host A rxe0/rcvd_pkts +2")

    def test_after_a_resend_other_counters_are_still_compared(self):
        two = RESENT.replace("rdma_recvs              +1", "rdma_recvs              +2")
        self.assertEqual(rb.missing_lines(EXPECTED, two)[0], "host A rxe0/rdma_recvs +1")


if __name__ == "__main__":
    unittest.main()
