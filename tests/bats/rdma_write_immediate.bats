#!/usr/bin/env bats
# rdma_write_immediate: a WRITE whose immediate value gives the responder a completion.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_write_immediate_requester)
    RESPONDER=$(prog rdma_write_immediate_responder)
}

@test "write_immediate: the default string and 0xabcd arrive, with no goodbye" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line 'Requester has written: "Hi RDMA!" with immediate 0xabcd'
    refute_line --partial "goodbye"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line 'Responder memory now holds: "Hi RDMA!" (8 bytes, immediate 0xabcd)'
    assert_peer_line "step 7: keep the QP a moment: if our ACK of the WRITE was lost, the requester resends it"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "write_immediate: custom and 256-byte strings arrive byte for byte" {
    local msg
    for msg in 'immediate: "the receive says it landed"' "$(printf 'abcdefgh%.0s' {1..32})"; do
        run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 -w "$msg"
        assert_success
        assert_equal "$peer_status" 0
        assert_equal "$(quoted 'Responder memory now holds:' "$peer_output")" "$msg"
        assert_equal "$(quoted 'Requester has written:' "$output")" "$msg"
        assert_peer_line --partial "(${#msg} bytes, immediate 0xabcd)"
    done
}

@test "write_immediate: without a posted receive the requester fails with RNR retry exceeded" {
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 8 --no-prepost-receive -- "$REQUESTER" $(requester_paths) -t 20
    refute_line --partial "Requester has written"
    assert_line --index -1 "Sample finished with errors"
    assert_line --partial "requester: step 6 failed: the RDMA WRITE with immediate completed with IBV_WC_RNR_RETRY_EXC_ERR"
    assert_line --partial "hint: the peer had no receive posted (Receiver Not Ready): the receiving side must post its receive before the sender sends"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "(demonstration) post NO receive"
    assert_peer_line --partial "responder: step 6 failed: timed out after 8 s waiting for the requester's RDMA WRITE with immediate, which cannot complete here: --no-prepost-receive posted no receive for it to consume"
    assert_peer_line --partial "hint: the peer may be gone, stopped or not started; check its output"
    refute_peer_line --partial "Responder memory now holds"
    assert_peer_line --index -1 "Sample finished with errors"
}
