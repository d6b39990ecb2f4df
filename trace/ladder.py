#!/usr/bin/env python3
"""Print the RoCE v2 (or, with --iwarp, iWARP) packets of a capture as a ladder a learner can read.

    trace/ladder.py CAPTURE.pcap --requester ADDR --responder ADDR [--opcodes] [--iwarp] [--json FILE]

tshark decodes every header (Wireshark's InfiniBand dissector: BTH, RETH, AETH, AtomicETH, ImmDt,
DETH, the CM's MADs); this script only lays the fields out: one line per packet, the time since the first one, the
direction as an arrow between the two sides, the opcode, the destination QP and the PSN, then the
fields that matter for that opcode, with the AETH syndrome spelled out (ACK, RNR NAK and its timer,
NAK and its reason) and a UD datagram's DETH (the Q_Key it carries, the QP that sent it). A request whose PSN was already seen on that QP is marked as a retransmission.

--opcodes prints only "DIRECTION OPCODE" per packet (what the tests compare). --json FILE also writes
the ladder as data, one record per line with the headers and the frame's bytes (record.py).
"""
import argparse
import json
import subprocess
import sys

import iwarp
import record
from fields import number, preview, raw_bytes

# IBTA vol. 1, 9.2 (base transport header): the opcodes of the RC and UD transports.
OPCODES = {
    0x00: "SEND First", 0x01: "SEND Middle", 0x02: "SEND Last", 0x03: "SEND Last with Immediate",
    0x04: "SEND Only", 0x05: "SEND Only with Immediate",
    0x06: "RDMA WRITE First", 0x07: "RDMA WRITE Middle", 0x08: "RDMA WRITE Last",
    0x09: "RDMA WRITE Last with Immediate", 0x0A: "RDMA WRITE Only", 0x0B: "RDMA WRITE Only with Immediate",
    0x0C: "RDMA READ Request", 0x0D: "RDMA READ Response First", 0x0E: "RDMA READ Response Middle",
    0x0F: "RDMA READ Response Last", 0x10: "RDMA READ Response Only",
    0x11: "Acknowledge", 0x12: "ATOMIC Acknowledge", 0x13: "CmpSwap", 0x14: "FetchAdd",
    0x16: "SEND Last with Invalidate", 0x17: "SEND Only with Invalidate",
    # IBTA 1.5 (2020): Debian 12's tshark 4.0 names neither, and leaves what follows the BTH undecoded
    0x1C: "FLUSH", 0x1D: "ATOMIC WRITE",
    0x64: "UD SEND Only", 0x65: "UD SEND Only with Immediate",
}
RESPONSES = {0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12}

# The CM's messages travel as MADs in UD SENDs to QP 1 (IBTA vol. 1, 12.6): attribute IDs.
CM_MESSAGES = {0x10: "CM REQ (connect request)", 0x11: "CM MRA (wait, message received)",
               0x12: "CM REJ (reject)", 0x13: "CM REP (connect reply)", 0x14: "CM RTU (ready to use)",
               0x15: "CM DREQ (disconnect request)", 0x16: "CM DREP (disconnect reply)",
               0x17: "CM SIDR REQ (service lookup)",
               0x18: "CM SIDR REP (lookup reply)"}
# REJ reasons the samples meet (IBTA vol. 1, table 112).
REJ_REASONS = {8: "invalid service ID: nobody listens on that port", 28: "consumer reject"}

# AETH NAK codes (IBTA vol. 1, table 47) and RNR NAK timer values (table 46), in ms.
NAK_CODES = {0: "PSN sequence error", 1: "invalid request", 2: "remote access error",
             3: "remote operational error", 4: "invalid RD request"}
RNR_TIMER_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28,
                1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88,
                163.84, 245.76, 327.68, 491.52]

FIELDS = ["frame.time_relative", "frame.number", "ip.src", "ip.dst", "infiniband.bth.opcode", "infiniband.bth.destqp",
          "infiniband.bth.psn", "infiniband.bth.a", "infiniband.bth.se", "infiniband.reth.va",
          "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
          "infiniband.aeth.msn", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
          "infiniband.atomicacketh.origremdt", "infiniband.immdt", "data.data", "infiniband.bth.padcnt",
          "infiniband.mad.attributeid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
          "infiniband.cm.req.serviceid.dport", "infiniband.cm.req.responderres", "infiniband.cm.req.initdepth",
          "infiniband.cm.req.retrcount", "infiniband.cm.req.rnrretrcount", "infiniband.cm.rep.localqpn",
          "infiniband.cm.rep.startpsn", "infiniband.cm.rep.respres", "infiniband.cm.rep.initdepth",
          "infiniband.cm.rej.reason", "infiniband.deth.q_key", "infiniband.deth.srcqp", "igmp.type", "igmp.maddr",
          "igmp.record_type", "infiniband.vendor",
          # not in the lines, only in the records of --json: what else the headers carry
          "ip.dsfield.dscp", "ip.dsfield.ecn", "ip.ttl", "udp.srcport", "udp.dstport", "infiniband.bth.m",
          "infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.invariant.crc", "infiniband.mad.mgmtclass",
          "infiniband.mad.method", "infiniband.mad.transactionid"]
FILTER = "infiniband or igmp"
WIDTH = 36  # of the arrow between the two sides
# IGMP (RFC 3376): a multicast receiver's kernel reports the group it joined or left (rdma_multicast).
IGMP_TYPES = {0x16: "IGMPv2 Membership Report", 0x17: "IGMPv2 Leave Group", 0x22: "IGMPv3 Membership Report"}


def syndrome(s, msn):
    kind, low = s >> 5, s & 0x1F
    if kind == 0:
        credits = "credits unlimited" if low == 0x1F else f"credits {low}"
        return f"ACK ({credits}), MSN {msn}"
    if kind == 1:
        return f"RNR NAK: receiver not ready, retry after {RNR_TIMER_MS[low]:g} ms (timer {low}), MSN {msn}"
    if kind == 3:
        return f"NAK: {NAK_CODES.get(low, f'code {low}')}, MSN {msn}"
    return f"syndrome 0x{s:02x}"


# Fields whose last occurrence is the one wanted: tshark 4.0 shows the bytes after the BTH of an opcode it
# does not know (ATOMIC WRITE) as a 4-byte piece first, then all of them.
LAST_OCCURRENCE = {"infiniband.vendor"}


def tshark_rows(pcap, fields=FIELDS, display_filter=FILTER):
    cmd = ["tshark", "-r", pcap, "-Y", display_filter, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    # tshark warns on stderr when run as root; only a failure matters.
    if res.returncode != 0:
        sys.exit(f"ladder: tshark could not read {pcap}: {res.stderr.strip()}")
    for line in res.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(fields) - len(cols))
        # every field's first occurrence (a list is comma-separated), but those whose last one is wanted
        yield {f: c.split(",")[-1 if f in LAST_OCCURRENCE else 0] for f, c in zip(fields, cols)}


def describe(row, seen):
    """(opcode name, details) of one packet."""
    if row["igmp.type"]:  # not RoCE: the kernel telling the network which groups this host wants
        kind, record = number(row["igmp.type"]), number(row["igmp.record_type"])
        # IGMPv3 says join and leave by the record's type: change to exclude nothing, or to include nothing.
        what = {4: "join", 3: "leave"}.get(record, f"record type {record}") if kind == 0x22 else ""
        return IGMP_TYPES.get(kind, f"IGMP type 0x{kind:02x}"), [f"group {row['igmp.maddr']}" + (f": {what}" if what else "")]
    op = number(row["infiniband.bth.opcode"])
    qp = number(row["infiniband.bth.destqp"])
    psn = number(row["infiniband.bth.psn"])
    name = OPCODES.get(op, f"opcode 0x{op:02x}")
    details = []
    mad = number(row["infiniband.mad.attributeid"])
    if qp == 1 and mad is not None:
        name = CM_MESSAGES.get(mad, f"MAD attribute 0x{mad:04x}")
        if mad == 0x10:
            details.append(f"port {number(row['infiniband.cm.req.serviceid.dport'])}, "
                           f"QPN 0x{number(row['infiniband.cm.req.localqpn']):06x}, "
                           f"PSN 0x{number(row['infiniband.cm.req.startpsn']):06x}, "
                           f"responder_resources {number(row['infiniband.cm.req.responderres'])}, "
                           f"initiator_depth {number(row['infiniband.cm.req.initdepth'])}, "
                           f"retry {number(row['infiniband.cm.req.retrcount'])}, "
                           f"rnr_retry {number(row['infiniband.cm.req.rnrretrcount'])}")
        elif mad == 0x13:
            details.append(f"QPN 0x{number(row['infiniband.cm.rep.localqpn']):06x}, "
                           f"PSN 0x{number(row['infiniband.cm.rep.startpsn']):06x}, "
                           f"responder_resources {number(row['infiniband.cm.rep.respres'])}, "
                           f"initiator_depth {number(row['infiniband.cm.rep.initdepth'])}")
        elif mad == 0x12:
            reason = number(row["infiniband.cm.rej.reason"])
            details.append(f"reason {reason}: {REJ_REASONS.get(reason, 'see IBTA table 112')}")
        return name, details
    if op == 0x1D:  # RETH (address, rkey, length 8), then the 8 bytes it places, then the ICRC
        v = raw_bytes(row["infiniband.vendor"])
        if len(v) >= 24:
            details.append(f"addr 0x{int.from_bytes(v[0:8], 'big'):x} rkey 0x{int.from_bytes(v[8:12], 'big'):x} "
                           f"length {int.from_bytes(v[12:16], 'big')}; 8 bytes {preview(v[16:24])}")
    if row["infiniband.reth.va"] and op not in (0x13, 0x14):
        details.append(f"addr 0x{number(row['infiniband.reth.va']):x} rkey 0x{number(row['infiniband.reth.r_key']):x} "
                       f"length {number(row['infiniband.reth.dmalen'])}")
    if op in (0x13, 0x14):
        va, rkey = number(row["infiniband.reth.va"]), number(row["infiniband.reth.r_key"])
        where = f"addr 0x{va:x} rkey 0x{rkey:x}, " if va is not None and rkey is not None else ""
        swap, cmp = number(row["infiniband.atomiceth.swapdt"]), number(row["infiniband.atomiceth.cmpdt"])
        details.append(where + (f"add {swap}" if op == 0x14 else f"compare {cmp}, swap {swap}"))
    if row["infiniband.aeth.syndrome"]:
        details.append(syndrome(number(row["infiniband.aeth.syndrome"]), number(row["infiniband.aeth.msn"])))
    if row["infiniband.atomicacketh.origremdt"]:
        details.append(f"old value {number(row['infiniband.atomicacketh.origremdt'])}")
    if row["infiniband.deth.q_key"]:  # UD: no connection, so each datagram names its key and its sender
        details.append(f"Q_Key 0x{number(row['infiniband.deth.q_key']):08x}, "
                       f"source QP 0x{number(row['infiniband.deth.srcqp']):06x}")
    if row["infiniband.immdt"]:
        details.append(f"immediate 0x{raw_bytes(row['infiniband.immdt']).hex()}")
    # The payload follows the headers, padded to 4 bytes; the BTH says how many pad bytes there are.
    payload = raw_bytes(row["data.data"])
    payload = payload[:len(payload) - (number(row["infiniband.bth.padcnt"]) or 0)]
    if op not in (0x0C, 0x11, 0x12, 0x13, 0x14, 0x1C, 0x1D):  # the packets that carry data (tshark decoded)
        details.append(f"{len(payload)} bytes" + (f" {preview(payload)}" if payload else ""))
    if op not in RESPONSES:
        key = (qp, psn)
        if key in seen:
            seen[key] += 1
            details.append(f"again: retransmission {seen[key]}")
        else:
            seen[key] = 0
    return name, details


def tshark_frames(pcap, display_filter):
    """The same packets as tshark_rows(), as tshark's JSON with every field's bytes (-x): what the records
    of --json take the frame's bytes and the headers' places from. Empty text if tshark fails (said on
    stderr: the records then carry no bytes)."""
    cmd = ["tshark", "-r", pcap, "-Y", display_filter, "-T", "json", "-x"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"ladder: tshark -T json -x could not read {pcap}; the records have no bytes: {res.stderr.strip()}",
              file=sys.stderr)
        return ""
    return res.stdout


def head_of(row, a):
    """What the line says after the arrow: the destination QP and the PSN, a TCP connection's ports, a group."""
    if a.iwarp:  # a TCP connection: the ports say which one
        return f"TCP {row['tcp.srcport']} > {row['tcp.dstport']}"
    if row.get("igmp.type"):
        return f"to {row['ip.dst']}"
    head = f"QP 0x{number(row['infiniband.bth.destqp']):06x} PSN 0x{number(row['infiniband.bth.psn']):06x}"
    if row["ip.dst"] not in (a.requester, a.responder):  # a multicast group (224.0.0.0/4), not a host
        head = f"to group {row['ip.dst']} {head}"
    return head


def line_of(time_ms, name, details, forward, head):
    """One line of the ladder: time, the arrow between the two sides with the opcode on it, then the fields."""
    label = f" {name} "
    if forward:
        arrow = "|--" + label + "-" * max(1, WIDTH - len(label) - 3) + ">|"
    else:
        arrow = "|<-" + label + "-" * max(1, WIDTH - len(label) - 3) + "-|"
    return f"{time_ms:7.3f} ms  {arrow}  {head}" + (f"  {'; '.join(details)}" if details else "")


def write_json(path, a, header, packets, steps):
    about = record.scenario(a.sample, a.title, a.provider, (a.requester_name, a.requester),
                            (a.responder_name, a.responder))
    try:
        with open(path, "w") as f:
            json.dump(record.document(about, header, packets, steps), f, indent=1)
            f.write("\n")
    except OSError as e:
        sys.exit(f"ladder: cannot write {path}: {e.strerror}")


def main():
    ap = argparse.ArgumentParser(description="Print a RoCE v2 capture as a packet ladder.")
    ap.add_argument("pcap")
    ap.add_argument("--requester", required=True, help="the requester's IP address")
    ap.add_argument("--responder", required=True, help="the responder's IP address")
    ap.add_argument("--requester-name", default="requester")
    ap.add_argument("--responder-name", default="responder")
    ap.add_argument("--opcodes", action="store_true", help="only DIRECTION OPCODE, one line per packet")
    ap.add_argument("--iwarp", action="store_true", help="the capture is iWARP (TCP, MPA, DDP, RDMAP), not RoCE v2")
    ap.add_argument("--json", metavar="FILE", help="also write the ladder as data: one JSON document (trace/README.md)")
    ap.add_argument("--sample", help="with --json: the sample's name, for the document's scenario")
    ap.add_argument("--title", help="with --json: the scenario as the report names it")
    ap.add_argument("--provider", help="with --json: rxe, siw, or the NIC's driver")
    ap.add_argument("--responder-steps", metavar="FILE",
                    help="with --json: the responder's step lines with their times (the step_times test hook)")
    ap.add_argument("--requester-steps", metavar="FILE", help="with --json: the requester's, timed by its own host's clock")
    ap.add_argument("--requester-pcap", metavar="FILE",
                    help="with --json: a capture on the requester's host, which places its steps among the packets")
    a = ap.parse_args()

    rows = list(tshark_rows(a.pcap, iwarp.FIELDS, iwarp.FILTER) if a.iwarp else tshark_rows(a.pcap))
    raw = record.frames(tshark_frames(a.pcap, iwarp.FILTER if a.iwarp else FILTER)) if a.json else {}
    seen = {}
    left = f"{a.requester_name} {a.requester}"
    header = f"{'time':>10}  {left:<{WIDTH + 3}} {a.responder_name} {a.responder}"
    if not a.opcodes:
        print(header)
    t0 = None
    packets = []
    for row in rows:
        t = float(row["frame.time_relative"] or 0)
        t0 = t if t0 is None else t0
        name, details = iwarp.describe(row) if a.iwarp else describe(row, seen)
        forward = row["ip.src"] == a.requester
        if a.opcodes:
            print(("->" if forward else "<-") + " " + name)
        if a.opcodes and not a.json:
            continue
        line = line_of((t - t0) * 1000, name, details, forward, head_of(row, a))
        if not a.opcodes:
            print(line)
        if a.json:
            time_ms = float(f"{(t - t0) * 1000:.3f}")  # as the line prints it
            packets.append(record.packet(row, time_ms, name, details, line, forward,
                                         raw.get(record.value(row.get("frame.number") or ""))))
    if not rows and not a.opcodes:
        print("(no iWARP packets captured)" if a.iwarp else "(no RoCE v2 packets captured)")
    if a.json:
        write_json(a.json, a, header, packets, steps_of(a, packets))


def steps_of(a, packets):
    """The programs' steps placed among PACKETS (record.place_steps), or [] when the trace timed none."""
    if not (a.responder_steps or a.requester_steps):
        return []
    try:
        responder = record.step_lines(open(a.responder_steps).read()) if a.responder_steps else []
        requester = record.step_lines(open(a.requester_steps).read()) if a.requester_steps else []
        here = record.pcap_frames(open(a.pcap, "rb").read())
        there = record.pcap_frames(open(a.requester_pcap, "rb").read()) if a.requester_pcap else []
    except (OSError, ValueError) as e:
        print(f"ladder: the programs' steps are left out: {e}", file=sys.stderr)
        return []
    return record.place_steps(here, responder, there, requester, [p["frame"] for p in packets if "frame" in p])


if __name__ == "__main__":
    main()
