"""The ladder as data: one JSON document per capture, built by ladder.py from the same tshark rows as
its text lines, one record per line (trace/README.md, "The ladder as data").

    document(scenario(...), header, [packet(...), ...])

A record holds what the ladder printed for a packet (its line, its opcode name and details), the
headers tshark decoded (one object per header, its fields by the name tshark gives them), and, from a
second tshark pass (`-T json -x`), the frame's bytes with where each header lies in them. Only what
tshark gave goes in: a field that is missing or unreadable is left out, never guessed.
"""
import bisect
import json
import re
import struct

from fields import raw_bytes

FORMAT = "rdma-samples trace"
VERSION = 1

# Which header a tshark field belongs to, by the field's prefix (the first that matches), and the
# header's name in a record. RoCE v2 has no GRH on the wire: IP and UDP take its place.
HEADERS = [
    ("ip.", "IP"), ("udp.", "UDP"), ("igmp.", "IGMP"),
    ("infiniband.bth.", "BTH"), ("infiniband.reth.", "RETH"), ("infiniband.aeth.", "AETH"),
    ("infiniband.atomiceth.", "AtomicETH"), ("infiniband.atomicacketh.", "AtomicAckETH"),
    ("infiniband.immdt", "ImmDt"), ("infiniband.deth.", "DETH"), ("infiniband.mad.", "MAD"),
    ("infiniband.cm.", "CM"), ("infiniband.invariant.", "ICRC"),
    ("tcp.", "TCP"), ("iwarp_mpa.", "MPA"), ("iwarp_ddp.", "DDP"), ("iwarp_rdma.", "RDMAP"),
]
# Where each header lies in the frame: tshark's `-T json -x` gives every protocol and header a
# "NAME_raw" entry [hex, offset, length, bitmask, type]. These are the ones a record names.
SPANS = {
    "eth_raw": "Ethernet", "ip_raw": "IP", "udp_raw": "UDP", "igmp_raw": "IGMP",
    "infiniband.bth_raw": "BTH", "infiniband.reth_raw": "RETH", "infiniband.aeth_raw": "AETH",
    "infiniband.atomiceth_raw": "AtomicETH", "infiniband.atomicacketh_raw": "AtomicAckETH",
    "infiniband.immdt_raw": "ImmDt", "infiniband.deth_raw": "DETH", "infiniband.mad_raw": "MAD",
    "infiniband.invariant.crc_raw": "ICRC", "tcp_raw": "TCP", "iwarp_mpa_raw": "MPA",
    "iwarp_ddp_rdmap_raw": "DDP/RDMAP", "data_raw": "payload",
}
# JavaScript reads a JSON number as a double: an integer above 2^53 - 1 (a 64-bit address, offset or
# atomic operand) stays exact only as text, so it is written as "0x..." instead.
SAFE_INTEGER = 2**53 - 1
# The fields that are bytes: tshark prints some with colons and some without ("00000000" is four bytes,
# not the number 0), so they are named. Any other field of colon-separated hex bytes is bytes too.
BYTES_FIELDS = {"data.data", "infiniband.immdt", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.privatedata"}
BYTES = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+")


def value(text, is_bytes=False):
    """One tshark field as JSON: an integer, true/false, bytes (IS_BYTES, or hex with colons) as plain
    hex, or the text as tshark gave it; None for an empty field, or bytes that are not hex."""
    text = text.split(",")[0].strip()
    if not text:
        return None
    if is_bytes or BYTES.fullmatch(text):
        try:
            return raw_bytes(text).hex()
        except ValueError:
            return None
    if text in ("True", "False"):
        return text == "True"
    try:
        n = int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return text
    return n if n <= SAFE_INTEGER else f"0x{n:x}"


def headers(row):
    """The row's fields, grouped into one object per header in the order of the wire:
    {"IP": {...}, "UDP": {...}, "BTH": {"opcode": 10, "destqp": 17, ...}, ...}."""
    grouped = {}
    for field, text in row.items():
        header, key = header_of(field)
        v = value(text or "", field in BYTES_FIELDS)
        if header is not None and v is not None:
            grouped.setdefault(header, {})[key] = v
    order = [name for _, name in HEADERS]  # as they follow each other on the wire
    return dict(sorted(grouped.items(), key=lambda item: order.index(item[0])))


def header_of(field):
    """(header, key) of a tshark field: "infiniband.bth.destqp" is ("BTH", "destqp"), "tcp.flags.syn"
    ("TCP", "flags_syn"); (None, None) for a field of no header (the frame's time and number, the payload)."""
    for prefix, name in HEADERS:
        if field.startswith(prefix):
            return name, field[len(prefix):].lstrip(".").replace(".", "_") or "value"
    return None, None


def transport(row):
    """What carried the packet: RoCE v2 (InfiniBand over UDP), iWARP (MPA/DDP/RDMAP over TCP), TCP
    alone (a handshake, an ACK) or IGMP (a multicast receiver's kernel)."""
    if row.get("infiniband.bth.opcode"):
        return "RoCEv2"
    if any(row.get(f) for f in ("iwarp_rdma.opcode", "iwarp_mpa.key.req", "iwarp_mpa.key.rep")):
        return "iWARP/TCP"
    if row.get("igmp.type"):
        return "IGMP"
    return "TCP"


def numbers_of(row, fields):
    """{name: number} of the FIELDS (name, tshark field) that hold one: the few a reader looks for first
    (QP and PSN, or TCP's numbers), absent rather than anything else."""
    found = {}
    for name, field in fields:
        v = value(row.get(field) or "")
        if isinstance(v, int) and not isinstance(v, bool):
            found[name] = v
    return found


def packet(row, time_ms, name, details, line, forward, raw=None):
    """The record of one packet: what the ladder printed for it (LINE, NAME, DETAILS; the arrow FORWARD
    from the requester to the responder, else back), the headers of ROW (its tshark fields) and, when
    RAW (from frames()) has it, the frame's bytes and where each header lies in them."""
    record = {"frame": value(row.get("frame.number") or ""), "time_ms": time_ms,
              "from": "requester" if forward else "responder", "to": "responder" if forward else "requester",
              "transport": transport(row), "opcode": name}
    record.update(numbers_of(row, [("qp", "infiniband.bth.destqp"), ("psn", "infiniband.bth.psn"),
                                 ("seq", "tcp.seq"), ("ack", "tcp.ack")]))
    record["details"] = list(details)
    record["headers"] = headers(row)
    payload = value(row.get("data.data") or "", is_bytes=True)
    if payload is not None:
        record["payload"] = payload
    if raw:
        record.update(raw)
        # (the places of the fields the record holds, header by header, in the same order)
        record["field_spans"] = {header: {key: raw["field_spans"][header][key] for key in fields
                                          if key in raw.get("field_spans", {}).get(header, {})}
                                 for header, fields in record["headers"].items()}
    record["line"] = line
    if record["frame"] is None:
        del record["frame"]
    return record


def scenario(sample, title, provider, requester, responder):
    """Who talked: REQUESTER and RESPONDER are (program, address), as the ladder's header names them."""
    return {"sample": sample, "title": title, "provider": provider,
            "hosts": {"requester": {"program": requester[0], "address": requester[1]},
                      "responder": {"program": responder[0], "address": responder[1]}}}


def document(about, header, packets, steps=()):
    """The JSON document of one capture: the scenario (ABOUT), the ladder's header line, the records and,
    when the trace timed them, the programs' STEPS (place_steps())."""
    doc = {"format": FORMAT, "version": VERSION, "scenario": about, "header": header, "packets": packets}
    if steps:
        doc["steps"] = list(steps)
    return doc


def pcap_frames(data):
    """[(time in seconds, frame bytes)] of a pcap file's DATA (tcpdump -w: microseconds or nanoseconds,
    either byte order). ValueError if it is not one."""
    if len(data) < 24:
        raise ValueError("not a pcap file (shorter than its header)")
    for order in "<>":
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in (0xa1b2c3d4, 0xa1b23c4d):
            scale = 1e-6 if magic == 0xa1b2c3d4 else 1e-9
            break
    else:
        raise ValueError("not a pcap file (no magic number)")
    found, at = [], 24
    while at + 16 <= len(data):
        seconds, fraction, kept, _ = struct.unpack(order + "IIII", data[at:at + 16])
        at += 16
        if at + kept > len(data):
            break  # (a capture cut short: the frames before it stand)
        found.append((seconds + fraction * scale, data[at:at + kept]))
        at += kept
    return found


STEP_LINE = re.compile(r"^(\d+\.\d+) (step \d+: .*)$")


def step_lines(text):
    """[(time in seconds, "step N: ...")] of a step_times file (common/src/log.cpp); other lines are skipped."""
    found = []
    for line in text.splitlines():
        m = STEP_LINE.match(line)
        if m:
            found.append((float(m.group(1)), m.group(2)))
    return found


def place_steps(here, here_steps, there, there_steps, shown):
    """The programs' steps among the packets: [{"side", "text", "before"}], in the order they happened,
    "before" naming the frame of the first packet of SHOWN (the records' frame numbers) that came after
    the step (absent: after the last one).

    HERE is the capture on the responder's host, whose frames the records number from 1; HERE_STEPS
    the responder's steps, timed by the same clock: a step comes before the first frame captured after
    it. THERE_STEPS are the requester's, timed by its own host's clock, which may be a second apart:
    THERE, a capture on that host, gives the first frame after the step by that clock, and the same
    frame (the same bytes; the k-th time for the k-th copy) in HERE says where it lies. A step whose
    next frames never reached HERE goes with the first that did."""
    placed = []  # (frame index in HERE, time by HERE's clock, side, text)
    times = [t for t, _ in here]
    for t, text in here_steps:
        placed.append((bisect.bisect_right(times, t), t, "responder", text))
    where = {}  # bytes -> [indices in HERE], in order
    for i, (_, frame) in enumerate(here):
        where.setdefault(frame, []).append(i)
    seen, twin = {}, []  # twin[j]: the index in HERE of THERE's j-th frame, or None
    for t, frame in there:
        k = seen.get(frame, 0)
        seen[frame] = k + 1
        copies = where.get(frame, [])
        twin.append(copies[k] if k < len(copies) else None)
    there_times = [t for t, _ in there]
    for t, text in there_steps:
        j = bisect.bisect_right(there_times, t)
        while j < len(there) and twin[j] is None:
            j += 1
        if j < len(there):  # (by HERE's clock: the same distance before that frame)
            placed.append((twin[j], here[twin[j]][0] - (there[j][0] - t), "requester", text))
        else:
            placed.append((len(here), here[-1][0] if here else t, "requester", text))
    placed.sort(key=lambda p: (p[0], p[1]))
    numbers = sorted(shown)
    steps = []
    for index, _, side, text in placed:
        step = {"side": side, "text": text}
        later = numbers[bisect.bisect_left(numbers, index + 1):]  # (frame numbers count from 1)
        if later:
            step["before"] = later[0]
        steps.append(step)
    return steps


def keep_first(pairs):
    """tshark's JSON repeats a key when a field occurs twice; keep the first, as the ladder's rows do."""
    kept = {}
    for key, v in pairs:
        kept.setdefault(key, v)
    return kept


def spans(layers, size):
    """[{"header", "offset", "length"}] of the headers in one packet's layers, by offset. A span that
    does not lie in the frame's SIZE bytes (tshark's offsets into a reassembled message) is left out."""
    found = []

    def walk(node):
        for key, v in node.items():
            if isinstance(v, dict):
                walk(v)
            elif key in SPANS and isinstance(v, list) and len(v) >= 3 and \
                    all(isinstance(n, int) for n in v[1:3]) and 0 <= v[1] and 0 < v[2] and v[1] + v[2] <= size:
                found.append({"header": SPANS[key], "offset": v[1], "length": v[2]})
    walk(layers)
    unique = {(s["header"], s["offset"]): s for s in found}
    return sorted(unique.values(), key=lambda s: (s["offset"], -s["length"]))


def frames(text):
    """{frame number: {"bytes": hex, "spans": [...]}} from tshark's `-T json -x` output; {} if it is not
    that (the records then carry no bytes)."""
    try:
        packets = json.loads(text, object_pairs_hook=keep_first)
    except ValueError:
        return {}
    found = {}
    for p in packets if isinstance(packets, list) else []:
        layers = p.get("_source", {}).get("layers", {}) if isinstance(p, dict) else {}
        raw = layers.get("frame_raw")
        number = value(str(layers.get("frame", {}).get("frame.number", "")))
        if not isinstance(number, int) or not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
            continue
        found[number] = {"bytes": raw[0], "spans": spans(layers, len(raw[0]) // 2),
                         "field_spans": field_spans(layers, len(raw[0]) // 2)}
    return found


def field_spans(layers, size):
    """{header: {key: [offset, length] or [offset, length, bitmask]}}: where each field of the headers
    lies in the frame, named as in a record's headers ("infiniband.bth.opcode_raw" is BTH's "opcode"). The
    bitmask says which bits of those bytes a field of less than a byte holds (BTH's "se" is 0x80 of its
    byte); a field outside the frame's SIZE bytes is left out."""
    found = {}

    def walk(node):
        for key, v in node.items():
            if isinstance(v, dict):
                walk(v)
            elif key.endswith("_raw") and isinstance(v, list) and len(v) >= 4 and \
                    all(isinstance(n, int) for n in v[1:4]) and 0 <= v[1] and 0 < v[2] and v[1] + v[2] <= size:
                header, name = header_of(key[:-len("_raw")])
                if header is not None:
                    found.setdefault(header, {}).setdefault(name, v[1:4] if v[3] else v[1:3])
    walk(layers)
    return found
