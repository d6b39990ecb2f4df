#!/usr/bin/env python3
"""trace/test_host.py: trace's host side without the VMs: scenario lines (shlex, never eval), the
command files the VMs run, the errors of a bad scenario, and a report from a saved scenario folder.

Run by meson test (suite unit) with RDMA_SAMPLES_BUILD, or by itself (a fake build folder then).
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "host.py")


def run(*args):
    return subprocess.run([sys.executable, HOST, *args], capture_output=True, text=True)


def command(path):
    with open(path) as f:
        return f.read().split("\0")[:-1]


class Prepare(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        # A build folder with the programs trace checks for (only that they exist and run).
        self.build = os.path.join(self.tmp.name, "build")
        for program in ("rdma_write/rdma_write_requester", "rdma_send_receive/rdma_send",
                        "rdma_multi_conn/rdma_multi_conn_send", "rdma_file_transfer/rdma_file_sender",
                        "rdma_recovery/rdma_recovery_client"):
            path = os.path.join(self.build, program)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(path, 0o755)
        self.out = os.path.join(self.tmp.name, "out")

    def test_batch_lines_are_split_like_a_shell_and_never_evaluated(self):
        batch = os.path.join(self.tmp.name, "batch")
        with open(batch, "w") as f:
            f.write("# a comment\n\nwrite --spoil-rkey -- -w 'two words' # and a comment\n"
                    "send_receive --cm --netem \"loss 5%\" -- -s \"$(touch pwned) $HOME\"\n")
        done = run("prepare", self.out, self.build, "--batch", batch)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, "2\n")
        q1 = command(os.path.join(self.out, "1", "requester.cmd"))
        self.assertEqual(q1[-2:], ["-w", "two words"])
        r1 = command(os.path.join(self.out, "1", "responder.cmd"))
        self.assertIn(os.path.join(self.out, "1", "share", "real.mmap"), r1)  # spoiled on its way
        self.assertTrue(os.path.exists(os.path.join(self.out, "1", "spoil")))
        q2 = command(os.path.join(self.out, "2", "requester.cmd"))
        self.assertEqual(q2[1:6], ["-cm", "-sa", "10.77.0.1", "-t", "10"])
        self.assertEqual(q2[-1], "$(touch pwned) $HOME")  # the text, as written
        self.assertFalse(os.path.exists("pwned"))
        with open(os.path.join(self.out, "2", "netem")) as f:
            self.assertEqual(f.read(), "loss 5%\n")
        with open(os.path.join(self.out, "2", "names")) as f:
            self.assertEqual(f.read(), "rdma_receive\nrdma_send\nsend_receive (RDMA CM), link: netem loss 5%\n")

    def test_an_rdma_cm_server_for_two_gets_two_clients_one_after_another(self):
        done = run("prepare", self.out, self.build, "--", "multi_conn", "--cm")
        self.assertEqual(done.returncode, 0, done.stderr)
        q = command(os.path.join(self.out, "1", "requester.cmd"))
        self.assertEqual(q[:4], ["bash", "-c", 'for ((i = 0; i < $0; i++)); do "$@" || exit; done', "2"])
        self.assertEqual(q[-2:], ["-s", "one message per connection"])

    def test_losing_a_cm_message_implies_rdma_cm(self):
        done = run("prepare", self.out, self.build, "--", "multi_conn", "--lose-cm", "DREP")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.out, "1", "cm")))
        with open(os.path.join(self.out, "1", "lose")) as f:
            self.assertEqual(f.read(), "DREP 0x0016\n")  # the name, and the attribute ID trace filters on
        with open(os.path.join(self.out, "1", "names")) as f:
            self.assertEqual(f.read().splitlines()[2], "multi_conn (RDMA CM), link: every other CM DREP lost")

    def test_losing_the_nth_data_packet(self):
        done = run("prepare", self.out, self.build, "--", "write", "--lose-nth", "15")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.out, "1", "lose-nth")) as f:
            self.assertEqual(f.read(), "15\n")  # what trace/trace's lose_nth filters on host B with
        with open(os.path.join(self.out, "1", "names")) as f:
            self.assertEqual(f.read().splitlines()[2], "write, link: the requester's data packet 15 lost")
        for args, message in [
            (["write", "--lose-nth", "0"], "trace: --lose-nth takes N, 1 to 9999: the Nth full-size data packet "
                                           "the requester sends is lost\n"),
            (["write", "--lose-nth", "3", "--netem", "loss 1%"], "trace: --lose-nth loses one packet on purpose: "
                                                                 "leave out --lose-cm and --netem\n"),
        ]:
            done = run("prepare", self.out, self.build, "--", *args)
            self.assertEqual((done.returncode, done.stderr), (2, message), args)

    def test_a_pair_that_connects_with_rdma_cm_only_gets_its_cm_flow_without_cm(self):
        done = run("prepare", self.out, self.build, "--", "file_transfer")
        self.assertEqual(done.returncode, 0, done.stderr)
        q = command(os.path.join(self.out, "1", "requester.cmd"))
        self.assertEqual(q[1:4], ["-cm", "-sa", "10.77.0.1"])
        self.assertEqual(q[-1], "/etc/services")
        self.assertTrue(os.path.exists(os.path.join(self.out, "1", "cm")))

    def test_a_restarted_responder_and_when(self):
        done = run("prepare", self.out, self.build, "--", "recovery_cm", "--restart-responder", "got #3:",
                   "--restart-when", "nobody listens")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.out, "1", "restart")) as f:
            self.assertEqual(f.read(), "got #3:\nnobody listens\n")  # what side A waits for, in that order
        q = command(os.path.join(self.out, "1", "requester.cmd"))
        self.assertEqual(q[-4:], ["--count", "6", "--interval-ms", "300"])
        with open(os.path.join(self.out, "1", "names")) as f:
            self.assertEqual(f.read().splitlines()[2],
                             'recovery_cm (RDMA CM), responder killed and started again after "got #3:"')

    def test_bad_scenarios_are_usage_errors(self):
        for args, message in [
            (["send_receive", "--spoil-rkey"], "trace: --spoil-rkey: send_receive exports no memory (no rkey)\n"),
            (["write", "--cm", "--kill-responder"], "trace: --kill-responder works with descriptor files, not --cm\n"),
            (["write", "--timeout", "0"], "trace: --timeout takes 1 to 999 seconds\n"),
            (["write", "--netem", "loss 5%; reboot"], 'trace: --netem takes a netem spec such as "loss 5%"\n'),
            (["write", "read"], "trace: one sample at a time (got 'write' and 'read')\n"),
            (["recovery", "--cm"], "trace: recovery connects with descriptor files only: leave out --cm and --lose-cm\n"),
            (["write", "--restart-responder", "x"], "trace: --restart-responder works with RDMA CM (--cm): a "
                                                    "restarted responder writes new descriptor files nobody reads\n"),
            (["write", "--cm", "--restart-when", "x"], "trace: --restart-when goes with --restart-responder\n"),
            (["write", "--lose-cm", "ACK"], "trace: --lose-cm takes REQ, REP, RTU, DREQ, DREP\n"),
            (["ud", "--lose-cm", "REQ"], "trace: --lose-cm: ud's RDMA CM makes no connection (a SIDR lookup, "
                                         "no REQ ... DREP)\n"),
            (["nope"], "trace: unknown sample 'nope' (see ./lab trace --help)\n"),
            (["--cm"], "trace: which sample? (see ./lab trace --help)\n"),
        ]:
            done = run("prepare", self.out, self.build, "--", *args)
            self.assertEqual((done.returncode, done.stderr), (2, message), args)

    def test_on_iwarp_every_pair_connects_with_rdma_cm_and_the_roce_only_options_are_refused(self):
        os.makedirs(self.out)
        with open(os.path.join(self.out, "provider"), "w") as f:
            f.write("siw\n")  # as trace/trace --provider siw writes it
        done = run("prepare", self.out, self.build, "--", "write")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(command(os.path.join(self.out, "1", "requester.cmd"))[1:4], ["-cm", "-sa", "10.77.0.1"])
        for args, message in [
            (["recovery"], "trace: recovery connects with descriptor files only, and iWARP connects only through "
                           "RDMA CM\n"),
            (["write", "--lose-cm", "REQ"], "trace: --lose-cm drops RoCE's CM messages (MADs in UDP); iWARP's are "
                                            "TCP and MPA frames\n"),
            (["write", "--spoil-rkey"], "trace: --kill-responder and --spoil-rkey work with descriptor files; iWARP "
                                        "connects only through RDMA CM\n"),
        ]:
            done = run("prepare", self.out, self.build, "--", *args)
            self.assertEqual((done.returncode, done.stderr), (2, message), args)

    def test_a_missing_program_says_build_first(self):
        done = run("prepare", self.out, self.build, "--", "read")
        self.assertEqual(done.returncode, 1)
        self.assertIn("rdma_read_requester is missing: ./lab build first", done.stderr)


class Report(unittest.TestCase):
    def test_last_words_and_changed_counters(self):
        with tempfile.TemporaryDirectory() as d:
            files = {
                "names": "rdma_write_responder\nrdma_write_requester\nwrite\n",
                "responder.rc": "137\n", "responder.out": "step 1: x\n",
                "requester.rc": "1\n",
                "requester.out": "step 7: y\nrequester: step 7 failed: boom\nhint: z\nSample finished with errors\n",
                "counters-a.before": "rxe0/lifespan 10\nrxe0/rcvd_pkts 5\nrxe0/sent_pkts 3\n",
                "counters-a.after": "rxe0/lifespan 12\nrxe0/rcvd_pkts 7\nrxe0/sent_pkts 3\n",
                "counters-b.before": "rxe0/sent_pkts 1\n", "counters-b.after": "rxe0/sent_pkts 4\n",
            }
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            sys.path.insert(0, HERE)
            import host
            host.ladder = lambda *_: "LADDER\n"
            self.assertEqual(host.report(d, False),
                             "responder: killed (SIGKILL), as asked\n"
                             "requester: exit status 1: requester: step 7 failed: boom\n\nLADDER\n\n"
                             "rxe counters that changed:\n"
                             "  host A rxe0/rcvd_pkts               +2\n"
                             "  host B rxe0/sent_pkts               +3\n\n"
                             f"capture: {d}/trace.pcap (open it in Wireshark, or: tshark -r {d}/trace.pcap -V)\n")


class Ladder(unittest.TestCase):
    def row(self, **fields):
        sys.path.insert(0, HERE)
        import ladder
        row = dict.fromkeys(ladder.FIELDS, "")
        row.update({"infiniband." + k.replace("__", "."): v for k, v in fields.items()})
        return ladder, row

    def test_a_ud_datagram_shows_its_deth(self):
        ladder, row = self.row(bth__opcode="100", bth__destqp="0x000011", bth__psn="5", deth__q_key="0x11111111",
                               deth__srcqp="0x000012", bth__padcnt="0")
        row["data.data"] = "23:31:2f:33"
        self.assertEqual(ladder.describe(row, {}),
                         ("UD SEND Only", ["Q_Key 0x11111111, source QP 0x000012", '4 bytes "#1/3"']))

    def test_the_sidr_lookup_of_rdma_ps_udp_is_named(self):
        ladder, row = self.row(bth__opcode="100", bth__destqp="1", bth__psn="0", mad__attributeid="0x0017")
        self.assertEqual(ladder.describe(row, {})[0], "CM SIDR REQ (service lookup)")
        row["infiniband.mad.attributeid"] = "0x0018"
        self.assertEqual(ladder.describe(row, {})[0], "CM SIDR REP (lookup reply)")


class IwarpLadder(unittest.TestCase):
    def row(self, **fields):
        sys.path.insert(0, HERE)
        import iwarp
        row = dict.fromkeys(iwarp.FIELDS, "")
        row.update({k.replace("__", "."): v for k, v in fields.items()})
        return iwarp, row

    def test_mpa_start_frames_show_revision_crc_and_the_read_depths(self):
        iwarp, row = self.row(iwarp_mpa__key__req="4d504120494420526571204672616d65", iwarp_mpa__rev="2",
                              iwarp_mpa__crc_flag="0", iwarp_mpa__marker_flag="0", iwarp_mpa__pdlength="4",
                              iwarp_mpa__privatedata="00010001")
        self.assertEqual(iwarp.describe(row), ("MPA Request", ["revision 2, CRC off, markers off, private data 4 "
                                                               "bytes", "IRD 1, ORD 1"]))

    def test_a_read_request_names_both_ends_and_its_response_is_tagged(self):
        iwarp, row = self.row(iwarp_rdma__opcode="0x01", iwarp_ddp__tagged_flag="0", iwarp_ddp__last_flag="1",
                              iwarp_ddp__qn="1", iwarp_ddp__msn="1", iwarp_ddp__mo="0",
                              iwarp_rdma__sinkstag="0x683c3c00", iwarp_rdma__sinkto="0x1170",
                              iwarp_rdma__rdmardsz="64", iwarp_rdma__srcstag="0xe650f300", iwarp_rdma__srcto="0xa470")
        self.assertEqual(iwarp.describe(row), ("RDMA Read Request", [
            "QN 1 (READ request queue) MSN 1 offset 0",
            "read 64 bytes from STag 0xe650f300 offset 0xa470 into STag 0x683c3c00 offset 0x1170"]))
        iwarp, row = self.row(iwarp_rdma__opcode="0x02", iwarp_ddp__tagged_flag="1", iwarp_ddp__last_flag="1",
                              iwarp_ddp__stag="0x683c3c00", iwarp_ddp__tagged_offset="0x1170", data__data="48:69")
        self.assertEqual(iwarp.describe(row), ("RDMA Read Response", ["STag 0x683c3c00 offset 0x1170", '2 bytes "Hi"']))

    def test_tcp_alone_is_named_as_tcp(self):
        iwarp, row = self.row(tcp__flags__syn="1", tcp__flags__ack="1")
        self.assertEqual(iwarp.describe(row), ("TCP SYN, ACK", []))
        iwarp, row = self.row(tcp__len="40", tcp__analysis__retransmission="1")
        self.assertEqual(iwarp.describe(row), ("TCP retransmission", ["40 bytes"]))


if __name__ == "__main__":
    unittest.main()
