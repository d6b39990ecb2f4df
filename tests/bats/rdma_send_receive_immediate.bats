#!/usr/bin/env bats
# rdma_send_receive_immediate: a SEND with immediate 0xABCD into a receive the receiver has posted.

load test_helper/common

setup() {
    require_rdma_device
    SENDER=$(prog rdma_send_immediate)
    RECEIVER=$(prog rdma_receive_immediate)
}

# No -m: send/receive exports no memory, so these programs take no resource descriptor.
sender_paths() {
    echo -ld "$BATS_TEST_TMPDIR/sender.desc" -re "$BATS_TEST_TMPDIR/receiver.desc"
}
receiver_paths() {
    echo -ld "$BATS_TEST_TMPDIR/receiver.desc" -re "$BATS_TEST_TMPDIR/sender.desc"
}

@test "rdma_send_receive_immediate: the default string and the immediate 0xabcd cross over" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20
    assert_success
    assert_line 'Submitting RDMA send with immediate task that sends "Hi RDMA!" with immediate 0xabcd to receiver'
    assert_line --partial "imm_data = htonl(0xabcd): the 32 bits travel in network byte order"
    assert_line "RDMA send with immediate task was done successfully"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "completion: IBV_WC_RECV, byte_len 8, IBV_WC_WITH_IMM set"
    assert_peer_line 'Got from sender: "Hi RDMA!" with immediate: 0xabcd'
    assert_peer_line "step 8: keep the QP a moment: if our ACK of the message was lost, the sender resends it"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_send_receive_immediate: a custom string with spaces and quotes arrives byte for byte" {
    local msg='RDMA says "hello", twice:  hello hello! '
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(quoted 'Submitting RDMA send with immediate task that sends' "$output" | sed 's/" with immediate 0xabcd to receiver$//')" "$msg"
    assert_peer_line "Got from sender: \"$msg\" with immediate: 0xabcd"
}

@test "rdma_send_receive_immediate: a 256-byte string, the default receive size, fits exactly" {
    local msg
    msg=$(printf 'abcdefgh%.0s' {1..32})
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line --partial "completion: IBV_WC_RECV, byte_len 256"
    assert_peer_line "Got from sender: \"$msg\" with immediate: 0xabcd"
}

@test "rdma_send_receive_immediate: an empty message still carries the immediate" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s ""
    assert_success
    assert_line 'Submitting RDMA send with immediate task that sends "" with immediate 0xabcd to receiver'
    assert_equal "$peer_status" 0
    assert_peer_line --partial "completion: IBV_WC_RECV, byte_len 0, IBV_WC_WITH_IMM set"
    assert_peer_line 'Got from sender: "" with immediate: 0xabcd'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_send_receive_immediate: -v traces the SEND_WITH_IMM and the receive" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -v -- "$SENDER" $(sender_paths) -t 20 -v
    assert_success
    assert_line --partial "[verbs] ibv_post_send(SEND_WITH_IMM) = 0"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "[verbs] ibv_post_recv = 0"
}

@test "rdma_send_receive_immediate: a plain SEND (rdma_send) is refused: no IBV_WC_WITH_IMM" {
    local plain
    plain=$(prog rdma_send)
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$plain" $(sender_paths) -t 20
    assert_success
    assert_equal "$peer_status" 1
    assert_peer_line --partial "IBV_WC_WITH_IMM not set"
    assert_peer_line "receiver: step 7 failed: the message arrived without an immediate (IBV_WC_WITH_IMM not set in wc_flags)"
    assert_peer_line "hint: the sender posted a plain SEND; start rdma_send_immediate, not rdma_send"
    refute_peer_line --partial "Got from sender"
    assert_peer_line --index -1 "Sample finished with errors"
}

@test "rdma_send_receive_immediate: a message larger than the posted receive fails on both sides, and both say why" {
    # --recv-size 4 with the default 8-byte string: receiver LOC_LEN_ERR (spec) or LOC_QP_OP_ERR
    # (Soft-RoCE); sender REM_INV_REQ_ERR (spec) or REM_OP_ERR (Soft-RoCE).
    RUN_FLAGS="-1 --separate-stderr" run_pair "$RECEIVER" $(receiver_paths) -t 20 --recv-size 4 -- \
        "$SENDER" $(sender_paths) -t 20
    assert_regex "$stderr" "sender: step 6 failed: the SEND with immediate completed with IBV_WC_REM_(INV_REQ|OP)_ERR"
    assert_regex "$stderr" "hint: the receive buffer the receiver posted is too small for our 8-byte message; it must post a receive at least that large \(its --recv-size\)"
    assert_line --index -1 "Sample finished with errors"
    assert_equal "$peer_status" 1
    assert_peer_line --regexp "^receiver: step 6 failed: the receive completed with IBV_WC_LOC_(LEN|QP_OP)_ERR"
    assert_peer_line "hint: the message was longer than the 4-byte receive buffer we posted (--recv-size); post a receive as large as the largest message (-s takes up to 256 bytes)"
    refute_peer_line --partial "Got from sender"
    assert_peer_line --index -1 "Sample finished with errors"
}

@test "rdma_send_receive_immediate: a SEND with no receive posted fails with RNR_RETRY_EXC_ERR, even with no data" {
    # An empty SEND with immediate still needs a receive: the immediate has to land in a completion.
    RUN_FLAGS="-1 --separate-stderr" run_pair "$RECEIVER" $(receiver_paths) -t 8 --no-prepost-receive -- \
        "$SENDER" $(sender_paths) -t 20 -s ""
    assert_regex "$stderr" "sender: step 6 failed: the SEND with immediate completed with IBV_WC_RNR_RETRY_EXC_ERR"
    assert_regex "$stderr" "hint: the receiver had no receive posted \(Receiver Not Ready; we retried 6 times\). Failing to submit a receive task prior to the send task results in a fatal failure"
    assert_line --index -1 "Sample finished with errors"
    assert_equal "$peer_status" 1
    assert_peer_line "step 4: (demonstration) post NO receive: the sender's SEND will find nothing to fill"
    assert_peer_line "receiver: step 6 failed: timed out after 8 s waiting for the sender's message, with no receive posted (--no-prepost-receive)"
    assert_peer_line --regexp "^hint: nothing can arrive without a posted receive: .*Failing to submit a receive task prior to the send task results in a fatal failure"
    assert_peer_line --index -1 "Sample finished with errors"
}
