#!/usr/bin/env python3
"""A peer of the TCP twin (rdma_file_transfer/tcp) that lies on purpose, for tests/bats/tcp_file_transfer.bats.

    tcp_file_peer.py sender PORT LIE     connect to the real tcp_file_receiver on 127.0.0.1:PORT and lie
    tcp_file_peer.py receiver PORT LIE   listen on 127.0.0.1:PORT for the real tcp_file_sender and lie

It speaks the wire format of rdma_file_transfer/tcp/protocol.hpp: one packed little-endian message of
440 bytes. Each LIE is one line below; the peer then waits (up to 10 s) for the other side to close.
"""
import socket
import struct
import sys

FORMAT = "<IHHQII32s384s"  # magic, version, type, length, chunk, flags, digest, text
MAGIC, VERSION = 0x54434654, 1
OFFER, ACCEPT, REFUSAL, DONE, VERDICT = 1, 2, 3, 4, 5


def message(kind, length=0, chunk=0, flags=0, digest=b"", text=b"", magic=MAGIC, version=VERSION):
    return struct.pack(FORMAT, magic, version, kind, length, chunk, flags, digest, text)


def read_message(conn):
    data = b""
    while len(data) < struct.calcsize(FORMAT):
        part = conn.recv(struct.calcsize(FORMAT) - len(data))
        if not part:
            sys.exit("the real program closed the connection before its message was whole")
        data += part
    return struct.unpack(FORMAT, data)


# Lies told to the real receiver, after connecting.
SENDER_LIES = {
    "not-ours": lambda c: c.sendall(b"GET / HTTP/1.0\r\n" + b"x" * 424),
    "version": lambda c: c.sendall(message(OFFER, 10, text=b"f", version=7)),
    "no-nul": lambda c: c.sendall(message(OFFER, 10, text=b"f" * 384)),
    "short": lambda c: c.sendall(message(OFFER, 10, text=b"f") + b"12345"),  # 5 of 10 bytes, then close
    "done-length": lambda c: (c.sendall(message(OFFER, 3, text=b"f")), read_message(c),
                              c.sendall(b"abc" + message(DONE, 4))),
    "out-of-turn": lambda c: c.sendall(message(VERDICT, flags=1)),
    "ansi-refusal": lambda c: c.sendall(message(REFUSAL, text=b"\x1b[31mred\x1b[0m")),
}

# Lies told to the real sender, once it has connected and offered.
RECEIVER_LIES = {
    "chunk-zero": lambda c: c.sendall(message(ACCEPT, chunk=0)),
    "chunk-huge": lambda c: c.sendall(message(ACCEPT, chunk=(1 << 30) + 1)),
    "verdict-early": lambda c: c.sendall(message(VERDICT, flags=1)),
    "false-match": lambda c: (c.sendall(message(ACCEPT, chunk=4096)), drain_until_done(c),
                              c.sendall(message(VERDICT, flags=1, digest=b"\x01" * 32))),
}


def drain_until_done(conn):
    offer = read_message(conn)
    left = offer[3]
    while left > 0:
        left -= len(conn.recv(min(left, 65536)))
    read_message(conn)


def main():
    role, port, lie = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if role == "sender":
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        SENDER_LIES[lie](conn)
    else:
        server = socket.create_server(("127.0.0.1", port))
        print("listening on port", port, flush=True)
        server.settimeout(10)
        conn, _ = server.accept()
        conn.settimeout(10)
        if lie != "false-match":
            read_message(conn)  # the offer
        RECEIVER_LIES[lie](conn)
    conn.shutdown(socket.SHUT_WR)
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


if __name__ == "__main__":
    main()
