"""The iWARP half of ladder.py: one line per TCP segment of an iWARP connection (Soft-iWARP, siw).

iWARP is RDMA over TCP, in three layers (tshark decodes all three):
  - MPA (RFC 5044, v2 in RFC 6581) frames the byte stream: after TCP's handshake, the client's MPA
    Request and the server's MPA Reply (the RDMA CM's private data rides in them), then FPDUs, each
    one DDP segment with its length, padding and an optional CRC-32c;
  - DDP (RFC 5041) says where a segment's bytes go: tagged (a STag and an offset the peer advertised,
    as a WRITE's or a READ response's) or untagged (queue number, message sequence number and offset:
    QN 0 the peer's posted receives, QN 1 its READ request queue, QN 2 its terminate queue);
  - RDMAP (RFC 5040; immediate data and atomics in RFC 7306) gives the operation.
There is no ACK of iWARP's own: TCP's acknowledgements carry the reliability, and a retransmission is
TCP's.
"""

from fields import number, preview, raw_bytes

# RDMAP opcodes (RFC 5040 section 4.3; 8 to 11 from RFC 7306).
RDMAP_OPCODES = {
    0x0: "RDMA Write", 0x1: "RDMA Read Request", 0x2: "RDMA Read Response", 0x3: "Send",
    0x4: "Send with Invalidate", 0x5: "Send with SE", 0x6: "Send with SE and Invalidate", 0x7: "Terminate",
    0x8: "Immediate Data", 0x9: "Immediate Data with SE", 0xA: "Atomic Request", 0xB: "Atomic Response",
}
# DDP's untagged queues (RFC 5040 section 5).
QUEUES = {0: "receive queue", 1: "READ request queue", 2: "terminate queue"}

FIELDS = ["frame.time_relative", "frame.number", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "tcp.len", "tcp.flags.syn",
          "tcp.flags.ack", "tcp.flags.fin", "tcp.flags.reset", "tcp.analysis.retransmission",
          "tcp.analysis.duplicate_ack", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.marker_flag",
          "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.rev", "iwarp_mpa.pdlength", "iwarp_mpa.privatedata",
          "iwarp_rdma.opcode", "iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.stag",
          "iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo", "iwarp_rdma.sinkstag",
          "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.srcto",
          "iwarp_rdma.inval_stag", "iwarp_rdma.term_layer", "iwarp_rdma.term_etype", "iwarp_rdma.term_errcode",
          "data.data",
          # not in the lines, only in the records of --json (record.py)
          "tcp.seq", "tcp.ack", "tcp.window_size", "iwarp_mpa.ulpdulength", "iwarp_mpa.crc", "iwarp_ddp.dv",
          "iwarp_rdma.version"]
FILTER = "tcp"


def flag(text):
    return text.split(",")[0].strip() in ("1", "True", "true")


def describe(row):
    """(name, details) of one TCP segment: a handshake step, an MPA frame, an RDMAP message, or TCP alone."""
    details = []
    if flag(row["tcp.flags.syn"]):
        return ("TCP SYN, ACK" if flag(row["tcp.flags.ack"]) else "TCP SYN"), details
    if flag(row["tcp.flags.reset"]):
        return "TCP RST", details
    if flag(row["tcp.flags.fin"]):
        return "TCP FIN", details
    if row["iwarp_mpa.key.req"] or row["iwarp_mpa.key.rep"]:
        name = "MPA Request" if row["iwarp_mpa.key.req"] else "MPA Reply"
        if flag(row["iwarp_mpa.rej_flag"]):
            name += " (reject)"
        details.append(f"revision {number(row['iwarp_mpa.rev'])}, "
                       f"CRC {'on' if flag(row['iwarp_mpa.crc_flag']) else 'off'}, "
                       f"markers {'on' if flag(row['iwarp_mpa.marker_flag']) else 'off'}, "
                       f"private data {number(row['iwarp_mpa.pdlength'])} bytes")
        private = raw_bytes(row["iwarp_mpa.privatedata"])
        if number(row["iwarp_mpa.rev"]) == 2 and len(private) >= 4:
            # MPA v2 (RFC 6581) begins the private data with the READ depths: IRD and ORD, 14 bits each,
            # what RoCE's CM REQ and REP carry as responder_resources and initiator_depth.
            ird, ord_ = int.from_bytes(private[0:2], "big") & 0x3FFF, int.from_bytes(private[2:4], "big") & 0x3FFF
            details.append(f"IRD {ird}, ORD {ord_}" + (f", then {len(private) - 4} bytes of the CM's" if len(private) > 4 else ""))
        return name, details
    op = number(row["iwarp_rdma.opcode"])
    if op is None:
        name = "TCP retransmission" if row["tcp.analysis.retransmission"] else "TCP ACK"
        if row["tcp.analysis.duplicate_ack"]:
            name = "TCP duplicate ACK"
        length = number(row["tcp.len"]) or 0
        if length:
            details.append(f"{length} bytes")
        return name, details
    name = RDMAP_OPCODES.get(op, f"RDMAP opcode 0x{op:x}")
    if flag(row["iwarp_ddp.tagged_flag"]):
        details.append(f"STag 0x{number(row['iwarp_ddp.stag']):x} offset 0x{number(row['iwarp_ddp.tagged_offset']):x}")
    else:
        qn = number(row["iwarp_ddp.qn"])
        details.append(f"QN {qn} ({QUEUES.get(qn, 'queue ?')}) MSN {number(row['iwarp_ddp.msn'])} "
                       f"offset {number(row['iwarp_ddp.mo'])}")
    if op == 0x1:
        details.append(f"read {number(row['iwarp_rdma.rdmardsz'])} bytes from STag "
                       f"0x{number(row['iwarp_rdma.srcstag']):x} offset 0x{number(row['iwarp_rdma.srcto']):x} "
                       f"into STag 0x{number(row['iwarp_rdma.sinkstag']):x} "
                       f"offset 0x{number(row['iwarp_rdma.sinkto']):x}")
    if op in (0x4, 0x6):
        details.append(f"invalidates STag 0x{number(row['iwarp_rdma.inval_stag']):x}")
    if op == 0x7:
        details.append(f"layer {number(row['iwarp_rdma.term_layer'])}, error type "
                       f"{number(row['iwarp_rdma.term_etype'])}, code {number(row['iwarp_rdma.term_errcode'])}")
    if not flag(row["iwarp_ddp.last_flag"]):
        details.append("more segments follow")
    if op in (0x0, 0x2, 0x3, 0x4, 0x5, 0x6):  # the messages that carry data
        payload = raw_bytes(row["data.data"])
        details.append(f"{len(payload)} bytes" + (f" {preview(payload)}" if payload else ""))
    if row["tcp.analysis.retransmission"]:
        details.append("again: a TCP retransmission")
    return name, details
