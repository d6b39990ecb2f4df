#!/usr/bin/env bats
# rdma_write: the requester writes a string into the responder's exported buffer.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_write_requester)
    RESPONDER=$(prog rdma_write_responder)
}

@test "rdma_write: the default string crosses over" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line 'Requester has written: "Hi RDMA!"'
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line 'Responder memory now holds: "Hi RDMA!"'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_write: a custom string with spaces and quotes arrives byte for byte" {
    local msg='RDMA says "hello", twice: hello hello!'
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 -w "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(quoted 'Requester has written:' "$output")" "$msg"
    assert_equal "$(quoted 'Responder memory now holds:' "$peer_output")" "$msg"
}

@test "rdma_write: a 256-byte string, the most the responder exports, fits exactly" {
    local msg
    msg=$(printf 'abcdefgh%.0s' {1..32})
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 -w "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(quoted 'Responder memory now holds:' "$peer_output")" "$msg"
}

@test "rdma_write: both sides print their QP numbers, and each names the other's" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    local req_qpn resp_qpn
    req_qpn=$(grep -o 'wrote .*requester.desc: QPN 0x[0-9a-f]*' <<<"$output" | grep -o '0x[0-9a-f]*$')
    resp_qpn=$(grep -o 'QPN 0x[0-9a-f]*, state INIT' <<<"$peer_output" | grep -o '0x[0-9a-f]*')
    assert_line --partial "peer: QPN $resp_qpn"
    assert_peer_line --partial "peer: QPN $req_qpn"
}

@test "rdma_write: the responder keeps its QP after the goodbye, in case its last ACK was lost" {
    unset RDMA_SAMPLES_TEST_LINGER_MS # the full linger, as a learner's run has it
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line "step 8: say goodbye with a zero-length SEND: on RC it arrives after the WRITE"
    assert_equal "$peer_status" 0
    assert_peer_line "step 9: keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it"
    assert_peer_line --partial "keeping the QP 500 ms"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_write: the test suites' shorter linger (RDMA_SAMPLES_TEST_LINGER_MS) says so" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line --partial "linger shortened for a test: 100 ms instead of 500 (RDMA_SAMPLES_TEST_LINGER_MS)"
    assert_peer_line --partial "keeping the QP 100 ms"
}

@test "rdma_write: the responder's linger is computed from its QP's timeout and retry_cnt (IBTA worst case)" {
    unset RDMA_SAMPLES_TEST_LINGER_MS # the full linger, as a learner's run has it
    run_pair "$RESPONDER" $(responder_paths) -t 20 -v -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "retransmit window of QP 0x[0-9a-f]{6}: \(retry_cnt 6 \+ 1\) x 4\.096 us x 2\^14 = 470 ms, rounded up to 500 ms"
    assert_peer_line --partial "keeping the QP 500 ms"
}

@test "rdma_write: -v traces the verbs calls" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 -v
    assert_success
    assert_line --partial "[verbs] ibv_alloc_pd = 0x"
    assert_line --partial "[verbs] ibv_modify_qp(RTR) = 0"
    assert_line --partial "[verbs] ibv_post_send(RDMA_WRITE) = 0"
}

@test "rdma_write: a GID index that does not exist is refused with a hint" {
    run -1 --separate-stderr "$REQUESTER" $(requester_paths) -g 200 -t 2
    assert_regex "$stderr" "requester: step 1 failed: GID index 200 is empty or out of range"
    assert_regex "$stderr" "hint: list the valid GIDs with ibv_devinfo -v"
    assert_line --index -1 "Sample finished with errors"
}

@test "rdma_write: an unknown device name lists the devices that exist" {
    run -1 --separate-stderr "$RESPONDER" $(responder_paths) -d no_such_dev -t 2
    assert_regex "$stderr" 'responder: step 1 failed: no RDMA device named "no_such_dev"'
    assert_regex "$stderr" "hint: the devices here are: .*; pass one with -d"
}
