#!/usr/bin/env python3
"""docs/ladders/test_ladders.py: the committed ladder data, without a VM or a browser.

Every runnable trace block of the tutorial has its data file (refresh writes them), named so that its
page finds it; each file registers one document of the shape trace/README.md describes ("The ladder as
data"), made by the block's own command; its packets are what the viewer (ladder.js) draws: a
direction, a time, an opcode, headers whose every field ladder.js can say the meaning of, and bytes
that the places of the headers and fields lie in.
"""
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


def load_refresh():
    loader = importlib.machinery.SourceFileLoader("refresh", os.path.join(HERE, "refresh"))
    spec = importlib.util.spec_from_loader("refresh", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


refresh = load_refresh()


def text_of(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_data(path):
    """(the name a data file registers, its document): the JSON between its second line and its last."""
    lines = text_of(path).split("\n")
    m = re.fullmatch(r'\(window\.rdmaLadders = window\.rdmaLadders \|\| \{\}\)\["([\w-]+)"\] =', lines[1])
    return (m.group(1) if m else None), json.loads("\n".join(lines[2:]).rstrip().rstrip(";"))


class Files(unittest.TestCase):
    """Each block has its file, named so that its page finds it, and its page asks for it."""

    def test_every_trace_block_has_its_data_file(self):
        blocks = refresh.trace_blocks()
        self.assertGreaterEqual(len(blocks), 17)
        listed = text_of(os.path.join(HERE, "ladders.txt")).split()
        self.assertEqual(sorted(listed), sorted(refresh.data_file(name) for name, _, _ in blocks))
        on_disk = sorted(os.path.basename(p) for p in os.listdir(HERE) if re.fullmatch(r"ladder-.*\.js", p))
        self.assertEqual(on_disk, sorted(listed))  # no file of a block that is gone

    def test_every_page_shows_its_ladders(self):
        for name, chapter, _ in refresh.trace_blocks():
            text = text_of(os.path.join(SOURCE, chapter))
            # one line of HTML (the viewer loads the data: ladder.js)
            line = f'\n<div class="rdma-ladder" data-ladder="{name}"></div>\n'
            self.assertIn(line, text, f"{chapter} lacks the ladder {name}")
            self.assertNotIn("htmlonly", text, f"{chapter}: a forge's Markdown view shows \\htmlonly as text")

    def test_each_ladder_sits_under_its_text_ladder(self):
        """After its block and the output shown for it, before the next runnable block."""
        for name, chapter, _ in refresh.trace_blocks():
            text = text_of(os.path.join(SOURCE, chapter))
            k = int(name.rsplit("-", 1)[1])
            marker = [m.start() for m in re.finditer(r"<!--\s*(?:runnable\s+)?trace\s*-->", text)][k - 1]
            ladder = text.index(f'data-ladder="{name}"')
            after = re.search(r"<!--\s*runnable\b", text[marker + 1:])
            end = marker + 1 + after.start() if after else len(text)
            self.assertTrue(marker < ladder < end, f"{chapter}: the ladder {name} is not under its block")
            shown = text.find("<!-- expected-output", marker, end)
            self.assertTrue(shown < 0 or shown < ladder, f"{chapter}: the ladder {name} comes before its block's output")

    # (./lab deps without --docs leaves Doxygen out; ./lab test installs it, so there this always runs)
    @unittest.skipUnless(shutil.which("doxygen"), "doxygen is not installed: ./lab deps --docs installs it")
    def test_doxygen_copies_the_viewer_and_the_data_beside_the_pages(self):
        doxyfile = text_of(os.path.join(SOURCE, "docs", "Doxyfile.in"))
        self.assertRegex(doxyfile, r"\n\s*HTML_EXTRA_FILES\s*=\s*@LADDER_FILES@")
        self.assertRegex(doxyfile, r"@LADDER_DIR@/ladder\.css")
        meson = text_of(os.path.join(SOURCE, "docs", "meson.build"))
        self.assertIn("'ladders/ladders.txt'", meson)
        # every page loads the viewer: Doxygen's header, with ladder.js in it
        self.assertRegex(doxyfile, r"\n\s*HTML_HEADER\s*=\s*@OUTPUT_DIR@/header\.html")
        self.assertIn("files('ladders/header')", meson)
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([os.path.join(HERE, "header"), "doxygen", d], check=True)
            header = text_of(os.path.join(d, "header.html"))
            self.assertIn('<script type="text/javascript" src="$relpath^ladder.js"></script>\n</head>', header)
            self.assertEqual(sorted(os.listdir(d)), ["header.html"])

    def test_the_providers_go_to_their_own_boots(self):
        blocks = [("02-w-1", "c", "./lab trace write"), ("19-x-1", "c", "./lab trace --provider siw write"),
                  ("19-x-2", "c", "./lab trace read --provider siw --cm")]
        self.assertEqual(refresh.providers(blocks), {"rxe": [(1, "write")], "siw": [(2, "write"), (3, "read --cm")]})

    def test_a_data_file_reads_back(self):
        document = {"format": "rdma-samples trace", "packets": []}
        text = refresh.script_of("05-x-2", "docs/tutorial/05-x.md", "./lab trace x", document)
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ladder-test-{os.getpid()}.js")
        with open(path, "w") as f:
            f.write(text)
        try:
            self.assertEqual(read_data(path), ("05-x-2", {"name": "05-x-2", "chapter": "docs/tutorial/05-x.md",
                                                         "command": "./lab trace x", "trace": document}))
        finally:
            os.remove(path)


class Data(unittest.TestCase):
    """The documents: what each block's command captured, in the shape the viewer draws."""

    def setUp(self):
        self.ladders = []
        for name, chapter, command in refresh.trace_blocks():
            path = os.path.join(HERE, refresh.data_file(name))
            if os.path.exists(path):  # (a missing one fails Files above)
                self.ladders.append((name, chapter, command, read_data(path)))

    def test_each_file_is_its_blocks_capture(self):
        for name, chapter, command, (registered, data) in self.ladders:
            self.assertEqual(registered, name)
            self.assertEqual((data["name"], data["chapter"], data["command"]), (name, chapter, command))
            trace = data["trace"]
            self.assertEqual((trace["format"], trace["version"]), ("rdma-samples trace", 1))
            sample = refresh.PROVIDER.sub("", command).split()[2]
            self.assertEqual(trace["scenario"]["sample"], sample, name)
            self.assertEqual(trace["scenario"]["provider"], "siw" if "--provider siw" in command else "rxe")
            hosts = trace["scenario"]["hosts"]
            self.assertEqual((hosts["requester"]["address"], hosts["responder"]["address"]), ("10.77.0.2", "10.77.0.1"))
            self.assertTrue(trace["packets"], f"{name}: no packet was captured")

    def test_each_packet_is_an_arrow_with_its_headers(self):
        for name, _, _, (_, data) in self.ladders:
            packets = data["trace"]["packets"]
            times = [p["time_ms"] for p in packets]
            self.assertEqual(times, sorted(times), name)
            self.assertEqual(times[0], 0.0, name)
            for n, p in enumerate(packets):
                at = f"{name}, packet {n + 1}"
                self.assertIn((p["from"], p["to"]), [("requester", "responder"), ("responder", "requester")], at)
                iwarp = data["trace"]["scenario"]["provider"] == "siw"
                self.assertIn(p["transport"], ("iWARP/TCP", "TCP") if iwarp else ("RoCEv2", "IGMP"), at)
                self.assertIn(p["opcode"], p["line"], at)
                self.assertTrue(p["headers"], at)
                self.assertTrue(all(isinstance(fields, dict) and fields for fields in p["headers"].values()), at)
                if p["transport"] == "RoCEv2":
                    self.assertEqual(p["headers"]["BTH"]["psn"], p["psn"], at)
                    self.assertEqual(p["headers"]["UDP"]["dstport"], 4791, at)

    def test_the_programs_steps_lie_among_the_packets(self):
        for name, _, _, (_, data) in self.ladders:
            steps = data["trace"].get("steps", [])
            self.assertTrue(steps, f"{name}: no step line (the trace timed none)")
            frames = [p["frame"] for p in data["trace"]["packets"]]
            befores = [s["before"] for s in steps if "before" in s]
            self.assertEqual(befores, sorted(befores), f"{name}: the steps are in the order of the packets")
            self.assertTrue(set(befores) <= set(frames), f"{name}: a step names a packet the ladder lacks")
            for side in ("requester", "responder"):  # each program's steps in the order it printed them
                numbers = [int(re.match(r"step (\d+): ", s["text"]).group(1)) for s in steps if s["side"] == side]
                self.assertTrue(numbers and numbers[0] == 1, f"{name}: the {side}'s steps start at step 1")

    def test_every_field_has_its_meaning_in_the_viewer(self):
        meanings = set(re.findall(r'^\s*"(\w+\.\w+)": "', text_of(os.path.join(HERE, "ladder.js")), re.M))
        self.assertGreater(len(meanings), 50)
        for name, _, _, (_, data) in self.ladders:
            for p in data["trace"]["packets"]:
                for header, fields in p["headers"].items():
                    missing = {f"{header}.{field}" for field in fields} - meanings
                    self.assertFalse(missing, f"{name}: no line in ladder.js's MEANINGS says what these are")

    def test_the_places_lie_in_the_bytes(self):
        for name, _, _, (_, data) in self.ladders:
            for n, p in enumerate(data["trace"]["packets"]):
                at = f"{name}, packet {n + 1}"
                self.assertIn("bytes", p, at)  # the hex view needs them
                frame = bytes.fromhex(p["bytes"])
                for span in p["spans"]:
                    self.assertLessEqual(span["offset"] + span["length"], len(frame), at)
                self.assertEqual(set(p["field_spans"]), set(p["headers"]), at)
                for header, places in p["field_spans"].items():
                    self.assertLessEqual(set(places), set(p["headers"][header]), at)
                    for place in places.values():
                        self.assertIn(len(place), (2, 3), at)
                        self.assertLessEqual(place[0] + place[1], len(frame), at)
                bth = p["field_spans"].get("BTH", {})
                if "opcode" in bth:  # the BTH's first byte is the opcode, where its place says
                    self.assertEqual(frame[bth["opcode"][0]], p["headers"]["BTH"]["opcode"], at)


if __name__ == "__main__":
    unittest.main()
