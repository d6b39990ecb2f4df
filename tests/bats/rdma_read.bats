#!/usr/bin/env bats
# rdma_read: the requester reads the string the responder exports.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_read_requester)
    RESPONDER=$(prog rdma_read_responder)
}

@test "rdma_read: the default string is read" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line 'Read from responder: "Hi RDMA!"'
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "access local_write|remote_read"
    assert_peer_line 'Responder memory still holds: "Hi RDMA!"'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_read: a custom and a 256-byte string are read byte for byte" {
    local msg
    for msg in 'read me: "one-sided", no CPU involved' "$(printf 'abcdefgh%.0s' {1..32})"; do
        run_pair "$RESPONDER" $(responder_paths) -t 20 -r "$msg" -- "$REQUESTER" $(requester_paths) -t 20
        assert_success
        assert_equal "$(quoted 'Read from responder:' "$output")" "$msg"
        assert_equal "$peer_status" 0
    done
}

@test "rdma_read: --length reads a prefix of the exported bytes" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -r "0123456789" -- "$REQUESTER" $(requester_paths) -t 20 --length 4
    assert_success
    assert_line --partial "post an RDMA READ of 4 bytes"
    assert_line 'Read from responder: "0123"'
    assert_equal "$peer_status" 0
}

@test "rdma_read: a WRITE where only remote read was granted is refused by the responder" {
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 10 -- "$REQUESTER" $(requester_paths) -t 20 --try-write
    assert_line --partial "(demonstration) the export grants local_write|remote_read, no remote write: posting a WRITE anyway"
    assert_line --partial "post an RDMA WRITE (demonstration)"
    # The responder's QP grants remote read only, and is checked before its memory region: Soft-RoCE
    # answers IBV_WC_REM_INV_REQ_ERR; a device that checks the region first says IBV_WC_REM_ACCESS_ERR.
    assert_line --regexp "^requester: step 7 failed: the RDMA WRITE into memory that grants only remote read completed with IBV_WC_REM_(INV_REQ|ACCESS)_ERR"
    assert_line --regexp "^hint: .*(does not grant this operation|granted this operation's remote permission)"
    refute_line --partial "Read from responder"
    assert_line --index -1 "Sample finished with errors"
    # The refused request broke the connection: the responder's QP went to the error state, which
    # flushes the receive it had posted for the goodbye. Its buffer is still unchanged.
    assert_equal "$peer_status" 1
    assert_peer_line --partial "responder: step 6 failed: the requester's goodbye (a zero-length SEND after its READ) completed with IBV_WC_WR_FLUSH_ERR"
    # No completion of the responder's holds the cause: its hint says the connection broke.
    assert_peer_line --partial "hint: this request was flushed because our QP went to the error state, and none of our own requests failed first: the connection broke"
}

@test "rdma_read: a READ longer than the exported range is refused before posting" {
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 10 -- "$REQUESTER" $(requester_paths) -t 20 --length 257
    assert_line --partial "requester: step 5 failed: a READ of 257 bytes would go past the 256 bytes the responder exported; nothing was posted"
    assert_line --partial "hint: read at most the exported length (--length 256)"
    refute_line --partial "step 6:"
    assert_equal "$peer_status" 1
}

@test "rdma_read: the responder takes -r, not -w" {
    run -2 --separate-stderr "$RESPONDER" -w x
    assert_equal "$stderr" 'rdma_read_responder: unknown flag "-w" (see --help)'
    run -2 --separate-stderr "$RESPONDER" -r "$(printf 'x%.0s' {1..257})"
    assert_equal "$stderr" 'rdma_read_responder: -r: the string is 257 bytes; the limit is 256'
}
