#!/usr/bin/env python3
"""trace/test_json.py: the ladder as data (ladder.py --json, record.py) without the VMs or tshark.

ladder.py runs against a stand-in tshark that prints saved output of the real one (trace/testdata:
./lab trace write on Soft-RoCE and on Soft-iWARP), so the text it prints and the document it writes
come from the same run and can be held against each other.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record  # noqa: E402

# A tshark that prints saved output: -T fields prints the saved rows, one column per -e in the order
# asked (an empty column for a field the row lacks); -T json prints the saved frames, or fails when
# there are none.
FAKE_TSHARK = """
import json, os, sys
with open(os.environ["TRACE_TEST_CANNED"]) as f:
    canned = json.load(f)
args = sys.argv[1:]
if args[args.index("-T") + 1] == "json":
    if canned["frames"] is None:
        sys.exit("tshark: (a failure, for the test)")
    print(json.dumps(canned["frames"]))
    sys.exit(0)
fields = [args[i + 1] for i, arg in enumerate(args) if arg == "-e"]
for row in canned["rows"]:
    print("\\t".join(row.get(field, "") for field in fields))
"""

WRITE_LADDER = """\
      time  rdma_write_requester 10.77.0.2          rdma_write_responder 10.77.0.1
  0.000 ms  |-- RDMA WRITE Only ---------------->|  QP 0x000011 PSN 0x2f92aa  addr 0x5555555ac000 rkey 0x2d4 length 25; 25 bytes "Hello from the requester!"
  6.761 ms  |<- Acknowledge ---------------------|  QP 0x000011 PSN 0x2f92aa  ACK (credits unlimited), MSN 1
 17.573 ms  |-- SEND Only ---------------------->|  QP 0x000011 PSN 0x2f92ab  0 bytes
 19.318 ms  |<- Acknowledge ---------------------|  QP 0x000011 PSN 0x2f92ab  ACK (credits unlimited), MSN 2
"""


def canned(name):
    with open(os.path.join(HERE, "testdata", name)) as f:
        return json.load(f)


class LadderRun(unittest.TestCase):
    """ladder.py --json on saved tshark output: the text it prints and the document it writes."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        tshark = os.path.join(self.tmp.name, "tshark")
        with open(tshark, "w") as f:
            f.write(f"#!{sys.executable}\n{FAKE_TSHARK}")
        os.chmod(tshark, 0o755)
        self.json = os.path.join(self.tmp.name, "trace.json")

    def ladder(self, data, *flags):
        """Run ladder.py on DATA (rows and frames as tshark would print them): (its stdout, the document)."""
        path = os.path.join(self.tmp.name, "canned.json")
        with open(path, "w") as f:
            json.dump(data, f)
        env = dict(os.environ, TRACE_TEST_CANNED=path, PATH=self.tmp.name + os.pathsep + os.environ["PATH"])
        done = subprocess.run([sys.executable, os.path.join(HERE, "ladder.py"), "capture.pcap",
                               "--requester", "10.77.0.2", "--responder", "10.77.0.1",
                               "--requester-name", "rdma_write_requester", "--responder-name", "rdma_write_responder",
                               "--json", self.json, *flags], capture_output=True, text=True, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.json) as f:
            return done.stdout, json.load(f)

    def assert_same_as_the_text(self, text, doc):
        """Each record says what the ladder printed for it, in order, at the time printed, never earlier."""
        lines = text.splitlines()
        self.assertEqual(doc["header"], lines[0])
        self.assertEqual([p["line"] for p in doc["packets"]], lines[1:])
        times = [p["time_ms"] for p in doc["packets"]]
        self.assertEqual(times, sorted(times))
        self.assertEqual(times, [float(line.split(" ms")[0]) for line in lines[1:]])
        self.assertEqual(json.loads(json.dumps(doc)), doc)

    def test_a_write_and_its_ack(self):
        text, doc = self.ladder(canned("write-rxe.json"), "--sample", "write", "--title", "write", "--provider", "rxe")
        self.assertEqual(text, WRITE_LADDER)  # the text ladder is what it was without --json
        self.assert_same_as_the_text(text, doc)
        self.assertEqual((doc["format"], doc["version"]), ("rdma-samples trace", 1))
        self.assertEqual(doc["scenario"], {
            "sample": "write", "title": "write", "provider": "rxe",
            "hosts": {"requester": {"program": "rdma_write_requester", "address": "10.77.0.2"},
                      "responder": {"program": "rdma_write_responder", "address": "10.77.0.1"}}})
        write, ack = doc["packets"][0], doc["packets"][1]
        self.assertEqual({k: write[k] for k in ("frame", "time_ms", "from", "to", "transport", "opcode", "qp", "psn")},
                         {"frame": 1, "time_ms": 0.0, "from": "requester", "to": "responder", "transport": "RoCEv2",
                          "opcode": "RDMA WRITE Only", "qp": 0x11, "psn": 0x2F92AA})
        self.assertEqual(write["details"], ["addr 0x5555555ac000 rkey 0x2d4 length 25", '25 bytes "Hello from the requester!"'])
        self.assertEqual(list(write["headers"]), ["IP", "UDP", "BTH", "RETH", "ICRC"])  # in the order of the wire
        self.assertEqual(write["headers"]["RETH"], {"va": 0x5555555AC000, "r_key": 0x2D4, "dmalen": 25})
        self.assertEqual({k: write["headers"]["BTH"][k] for k in ("opcode", "destqp", "psn", "padcnt")},
                         {"opcode": 0x0A, "destqp": 0x11, "psn": 0x2F92AA, "padcnt": 3})
        self.assertEqual(write["headers"]["UDP"]["dstport"], 4791)
        self.assertEqual(bytes.fromhex(write["payload"]), b"Hello from the requester!\0\0\0")  # with the BTH's pad
        spans = {s["header"]: (s["offset"], s["length"]) for s in write["spans"]}
        self.assertEqual(spans, {"Ethernet": (0, 14), "IP": (14, 20), "UDP": (34, 8), "BTH": (42, 12), "RETH": (54, 16),
                                 "payload": (70, 28), "ICRC": (98, 4)})
        frame = bytes.fromhex(write["bytes"])
        self.assertEqual(len(frame), 102)
        # where each field lies (those the saved output kept): bytes, and the bits of a byte a flag holds
        self.assertEqual(list(write["field_spans"]), list(write["headers"]))
        self.assertEqual(write["field_spans"]["BTH"], {"opcode": [42, 1], "se": [43, 1, 128], "destqp": [47, 3],
                                                       "psn": [51, 3]})
        self.assertEqual(write["field_spans"]["RETH"], {"va": [54, 8], "r_key": [62, 4], "dmalen": [66, 4]})
        self.assertEqual(frame[66:70], (25).to_bytes(4, "big"))  # RETH's length, where its span says
        self.assertEqual(ack["field_spans"]["AETH"], {})  # (none kept for frame 2)
        self.assertEqual(frame[42], 0x0A)  # the BTH begins with the opcode
        self.assertEqual(frame[70:95], b"Hello from the requester!")
        self.assertEqual({k: ack[k] for k in ("from", "to", "opcode", "qp", "psn")},
                         {"from": "responder", "to": "requester", "opcode": "Acknowledge", "qp": 0x11, "psn": 0x2F92AA})
        self.assertEqual(ack["headers"]["AETH"], {"syndrome": 0x1F, "msn": 1})
        self.assertIn({"header": "AETH", "offset": 54, "length": 4}, ack["spans"])
        self.assertNotIn("payload", ack)

    def test_an_iwarp_connection(self):
        text, doc = self.ladder(canned("write-siw.json"), "--iwarp", "--provider", "siw")
        self.assert_same_as_the_text(text, doc)
        self.assertEqual(doc["scenario"]["provider"], "siw")
        self.assertIsNone(doc["scenario"]["sample"])  # (not given: ladder.py run by hand)
        syn, request, send, ack = doc["packets"]
        self.assertEqual([p["transport"] for p in doc["packets"]], ["TCP", "iWARP/TCP", "iWARP/TCP", "TCP"])
        self.assertEqual([p["opcode"] for p in doc["packets"]], ["TCP SYN", "MPA Request", "Send", "TCP ACK"])
        self.assertEqual(syn["headers"]["TCP"]["flags_syn"], 1)
        self.assertEqual(request["headers"]["MPA"]["rev"], 2)
        self.assertEqual(request["headers"]["MPA"]["privatedata"], "00000000")  # bytes, not the number 0
        self.assertEqual((send["from"], send["seq"], send["ack"]), ("responder", 25, 25))
        self.assertEqual(send["headers"]["DDP"], {"tagged_flag": 0, "last_flag": 1, "qn": 0, "msn": 1, "mo": 0, "dv": 1})
        self.assertEqual(send["headers"]["RDMAP"], {"opcode": 3, "version": 1})
        self.assertTrue(bytes.fromhex(send["payload"]).startswith(b"# rdma-samples resource descriptor"))
        self.assertEqual([(s["header"], s["offset"], s["length"]) for s in send["spans"]],
                         [("Ethernet", 0, 14), ("IP", 14, 20), ("TCP", 34, 32), ("MPA", 66, 188), ("DDP/RDMAP", 68, 18),
                          ("payload", 86, 163)])
        for p in doc["packets"]:
            self.assertNotIn("qp", p)
            self.assertNotIn("psn", p)

    def test_the_same_document_with_only_the_opcodes_printed(self):
        text, doc = self.ladder(canned("write-rxe.json"), "--opcodes")
        self.assertEqual(text, "-> RDMA WRITE Only\n<- Acknowledge\n-> SEND Only\n<- Acknowledge\n")
        self.assertEqual([p["line"] for p in doc["packets"]], WRITE_LADDER.splitlines()[1:])

    def test_without_the_bytes_the_records_stand(self):
        data = canned("write-rxe.json")
        data["frames"] = None  # tshark -T json -x failed
        text, doc = self.ladder(data)
        self.assertEqual(text, WRITE_LADDER)
        self.assertEqual(len(doc["packets"]), 4)
        for p in doc["packets"]:
            self.assertNotIn("bytes", p)
            self.assertNotIn("spans", p)
            self.assertIn("BTH", p["headers"])

    def test_an_empty_capture_is_an_empty_list(self):
        text, doc = self.ladder({"rows": [], "frames": []})
        self.assertEqual(text.splitlines()[1], "(no RoCE v2 packets captured)")
        self.assertEqual(doc["packets"], [])


class Records(unittest.TestCase):
    """record.py alone: what a bad or missing field does."""

    def test_a_bad_or_missing_field_is_left_out(self):
        row = {"frame.number": "", "frame.time_relative": "0.5", "ip.src": "10.77.0.2",
               "infiniband.bth.opcode": "17", "infiniband.bth.destqp": "0x000011", "infiniband.bth.psn": "",
               "infiniband.aeth.syndrome": "0x1f", "infiniband.aeth.msn": None, "infiniband.immdt": "zz:zz",
               "data.data": "not hex"}
        p = record.packet(row, 0.0, "Acknowledge", [], "LINE", False)
        self.assertEqual(p["qp"], 0x11)
        for absent in ("psn", "frame", "bytes", "spans", "payload"):
            self.assertNotIn(absent, p)
        self.assertEqual(p["headers"]["AETH"], {"syndrome": 0x1F})
        self.assertNotIn("ImmDt", p["headers"])
        self.assertEqual((p["line"], p["from"], p["to"], p["transport"]), ("LINE", "responder", "requester", "RoCEv2"))

    def test_a_number_that_is_not_one_stays_tshark_text_and_is_no_psn(self):
        p = record.packet({"infiniband.bth.opcode": "10", "infiniband.bth.psn": "0xzz"}, 0.0, "x", [], "", True)
        self.assertNotIn("psn", p)  # QP, PSN, seq and ack are numbers or absent
        self.assertEqual(p["headers"]["BTH"]["psn"], "0xzz")

    def test_values(self):
        self.assertEqual(record.value("0x000011"), 17)
        self.assertEqual(record.value("42,43"), 42)  # the first of a list, as the ladder takes it
        self.assertEqual(record.value("48:69"), "4869")
        self.assertEqual(record.value("00000000", is_bytes=True), "00000000")
        self.assertEqual(record.value("True"), True)
        self.assertEqual(record.value("10.77.0.1"), "10.77.0.1")
        self.assertEqual(record.value("0xffffffffffffffff"), "0xffffffffffffffff")  # beyond a double's integers
        self.assertEqual(record.value(str(2**53 - 1)), 2**53 - 1)
        self.assertIsNone(record.value(""))

    def test_frames_takes_what_it_can(self):
        self.assertEqual(record.frames(""), {})
        self.assertEqual(record.frames("not json"), {})
        self.assertEqual(record.frames('{"an": "object"}'), {})
        layers = {"frame_raw": ["0a0b0c0d", 0, 4, 0, 1], "frame": {"frame.number": "7"},
                  "eth_raw": ["0a0b", 0, 2, 0, 1], "data_raw": ["0c0d0e", 2, 3, 0, 1],  # beyond the frame: left out
                  "infiniband": {"infiniband.bth_raw": "not a list"}}
        found = record.frames(json.dumps([{"_source": {"layers": layers}}, {"_source": {}}, "junk"]))
        self.assertEqual(found, {7: {"bytes": "0a0b0c0d", "spans": [{"header": "Ethernet", "offset": 0, "length": 2}],
                                     "field_spans": {}}})
        layers["infiniband"] = {"infiniband.bth.opcode_raw": ["0a", 2, 1, 0, 4], "infiniband.bth.se_raw": ["0", 3, 1, 128, 2],
                                "infiniband.bth.psn_raw": ["2f92aa", 3, 3, 0, 6]}  # (beyond the frame: left out)
        found = record.frames(json.dumps([{"_source": {"layers": layers}}]))
        self.assertEqual(found[7]["field_spans"], {"BTH": {"opcode": [2, 1], "se": [3, 1, 128]}})


def pcap(frames, order="<", nano=False):
    """A pcap file of FRAMES [(seconds, bytes)], as tcpdump -w writes it."""
    import struct
    magic = 0xa1b23c4d if nano else 0xa1b2c3d4
    data = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 4096, 1)
    for t, frame in frames:
        fraction = round((t - int(t)) * (1e9 if nano else 1e6))
        data += struct.pack(order + "IIII", int(t), fraction, len(frame), len(frame)) + frame
    return data


class Steps(unittest.TestCase):
    """The programs' steps beside the packets (the step_times hook's files and the captures of both hosts)."""

    def test_pcap_frames(self):
        frames = [(100.25, b"abc"), (100.5, b"de")]
        for order in "<>":
            for nano in (False, True):
                found = record.pcap_frames(pcap(frames, order, nano))
                self.assertEqual([f for _, f in found], [b"abc", b"de"])
                self.assertAlmostEqual(found[1][0], 100.5, places=6)
        self.assertEqual(record.pcap_frames(pcap(frames)[:-1]), frames[:1])  # cut short: the whole frames
        for junk in (b"", b"x" * 30):
            with self.assertRaises(ValueError):
                record.pcap_frames(junk)

    def test_step_lines(self):
        text = "1795971219.429485260 step 1: open a device\nnot a step\n1795971219.5 step 12: post: a, b\n"
        self.assertEqual(record.step_lines(text), [(1795971219.42948526, "step 1: open a device"),
                                                   (1795971219.5, "step 12: post: a, b")])

    def test_each_host_by_its_own_clock(self):
        # host A's capture: a WRITE at 10.0, its ACK at 10.1, the goodbye at 10.5 (frames 1 to 3);
        # host B's clock is 100 s behind and sees each frame 1 ms earlier or later than host A.
        here = [(10.0, b"write"), (10.1, b"ack"), (10.5, b"bye")]
        there = [(-90.001, b"write"), (-89.899, b"ack"), (-89.501, b"bye")]
        responder = [(9.0, "step 1: wait"), (10.2, "step 5: wait for the goodbye"), (11.0, "step 6: done")]
        requester = [(-90.5, "step 4: post the WRITE"), (-89.7, "step 5: SEND the goodbye")]
        steps = record.place_steps(here, responder, there, requester, [1, 2, 3])
        self.assertEqual([(s["side"], s["text"].split(":")[0], s.get("before")) for s in steps], [
            ("responder", "step 1", 1), ("requester", "step 4", 1),
            ("responder", "step 5", 3), ("requester", "step 5", 3), ("responder", "step 6", None)])

    def test_copies_lost_frames_and_hidden_packets(self):
        # the same bytes twice (a resend): the k-th copy on one host is the k-th on the other; a frame
        # host A never saw places the step with the next one that it did
        here = [(1.0, b"req"), (2.0, b"req"), (3.0, b"ack")]
        there = [(5.0, b"req"), (5.5, b"lost"), (6.0, b"req"), (7.0, b"ack")]
        requester = [(5.2, "step 6: wait"), (6.5, "step 7: read")]
        steps = record.place_steps(here, [], there, requester, [1, 2, 3])
        self.assertEqual([s.get("before") for s in steps], [2, 3])
        steps = record.place_steps(here, [], there, requester, [1, 3])  # a packet the ladder does not show
        self.assertEqual([s.get("before") for s in steps], [3, 3])
        self.assertEqual(record.place_steps(here, [], [], requester, [1, 2, 3])[0], {"side": "requester", "text": "step 6: wait"})
        self.assertEqual(record.place_steps([], [(1.0, "step 1: x")], [], [], []), [{"side": "responder", "text": "step 1: x"}])

    def test_the_document_names_them_only_when_there_are_some(self):
        self.assertNotIn("steps", record.document({}, "", []))
        self.assertEqual(record.document({}, "", [], [{"side": "requester", "text": "step 1: x"}])["steps"],
                         [{"side": "requester", "text": "step 1: x"}])


class Paths(unittest.TestCase):
    def test_one_document_or_one_per_scenario_of_a_batch(self):
        import host
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(host.json_path_of(os.path.join(d, "1"), os.path.join(d, "t.json"), False),
                             os.path.join(d, "t.json"))
            self.assertEqual(host.json_path_of(os.path.join(d, "2"), os.path.join(d, "docs"), True),
                             os.path.join(d, "docs", "2.json"))
            self.assertTrue(os.path.isdir(os.path.join(d, "docs")))
            self.assertIsNone(host.json_path_of(os.path.join(d, "1"), None, True))


if __name__ == "__main__":
    unittest.main()
