#!/usr/bin/env bats
# rdma_send_receive: the sender SENDs a string into a receive the receiver has posted (two-sided).

load test_helper/common

setup() {
    require_rdma_device
    SENDER=$(prog rdma_send)
    RECEIVER=$(prog rdma_receive)
}

# No -m: send/receive exports no memory, so these programs take no resource descriptor.
sender_paths() {
    echo -ld "$BATS_TEST_TMPDIR/sender.desc" -re "$BATS_TEST_TMPDIR/receiver.desc"
}
receiver_paths() {
    echo -ld "$BATS_TEST_TMPDIR/receiver.desc" -re "$BATS_TEST_TMPDIR/sender.desc"
}

@test "rdma_send_receive: the default string crosses over" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20
    assert_success
    assert_line 'Submitting RDMA send task that sends "Hi RDMA!" to receiver'
    assert_line "RDMA send task was done successfully"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line --partial "posted a receive of 256 bytes"
    assert_line --partial "completion: IBV_WC_RECV, byte_len 8"
    assert_line 'Got from sender: "Hi RDMA!"'
    assert_line --index -1 "Sample finished successfully"
}

@test "rdma_send_receive: a custom string with spaces and quotes arrives byte for byte" {
    local msg='RDMA says "hello", twice:  hello hello! '
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(quoted 'Submitting RDMA send task that sends' "$output")" "$msg"
    assert_equal "$(quoted 'Got from sender:' "$peer_output")" "$msg"
    run echo "$peer_output"
    assert_line --partial "completion: IBV_WC_RECV, byte_len ${#msg}"
}

@test "rdma_send_receive: a 256-byte string, the default receive size, fits exactly" {
    local msg
    msg=$(printf 'abcdefgh%.0s' {1..32})
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "$msg"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(quoted 'Got from sender:' "$peer_output")" "$msg"
    run echo "$peer_output"
    assert_line --partial "completion: IBV_WC_RECV, byte_len 256"
}

@test "rdma_send_receive: an empty message is a zero-length SEND that still completes the receive" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s ""
    assert_success
    assert_line 'Submitting RDMA send task that sends "" to receiver'
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line --partial "completion: IBV_WC_RECV, byte_len 0"
    assert_line 'Got from sender: ""'
    assert_line --index -1 "Sample finished successfully"
}

@test "rdma_send_receive: the receiver prints only byte_len bytes, not the rest of its buffer" {
    # A 5-byte message into a receive buffer of exactly 5 bytes: no terminating NUL arrives, and none
    # is needed, because byte_len says where the message ends.
    run_pair "$RECEIVER" $(receiver_paths) -t 20 --recv-size 5 -- "$SENDER" $(sender_paths) -t 20 -s "12345"
    assert_success
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line 'Got from sender: "12345"'
}

@test "rdma_send_receive: -v traces the verbs calls, and neither side exports anything" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -v -- "$SENDER" $(sender_paths) -t 20 -v
    assert_success
    assert_line --partial "[verbs] ibv_post_send(SEND) = 0"
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line --partial "[verbs] ibv_post_recv = 0"
    # The only files written are the two connection descriptors.
    run ls "$BATS_TEST_TMPDIR"
    refute_output --partial resource
}

@test "rdma_send_receive: a message larger than the posted receive fails on both sides, and both say why" {
    # --recv-size 4 with the default 8-byte string. The IB spec's status on the receiver is
    # IBV_WC_LOC_LEN_ERR; Soft-RoCE reports IBV_WC_LOC_QP_OP_ERR. The sender sees REM_INV_REQ_ERR
    # (spec) or REM_OP_ERR (Soft-RoCE).
    RUN_FLAGS="-1 --separate-stderr" run_pair "$RECEIVER" $(receiver_paths) -t 20 --recv-size 4 -- \
        "$SENDER" $(sender_paths) -t 20
    assert_regex "$stderr" "sender: step 7 failed: the SEND completed with IBV_WC_REM_(INV_REQ|OP)_ERR"
    assert_regex "$stderr" "hint: the receive buffer the receiver posted is too small for our 8-byte message; it must post a receive at least that large \(its --recv-size\)"
    assert_line --index -1 "Sample finished with errors"
    assert_equal "$peer_status" 1
    run echo "$peer_output"
    assert_line --partial "posted a receive of 4 bytes"
    assert_line --regexp "^receiver: step 7 failed: the receive completed with IBV_WC_LOC_(LEN|QP_OP)_ERR"
    assert_line "hint: the message was longer than the 4-byte receive buffer we posted (--recv-size); post a receive as large as the largest message (-s takes up to 256 bytes)"
    refute_line --partial "Got from sender"
    assert_line --index -1 "Sample finished with errors"
}

@test "rdma_send_receive: a SEND with no receive posted fails with RNR_RETRY_EXC_ERR, naming the missing receive" {
    local start=$SECONDS
    RUN_FLAGS="-1 --separate-stderr" run_pair "$RECEIVER" $(receiver_paths) -t 8 --no-prepost-receive -- \
        "$SENDER" $(sender_paths) -t 20
    assert_regex "$stderr" "sender: step 7 failed: the SEND completed with IBV_WC_RNR_RETRY_EXC_ERR"
    assert_regex "$stderr" "hint: the receiver had no receive posted \(Receiver Not Ready; we retried 6 times\). Failing to submit a receive task prior to the send task results in a fatal failure"
    assert_line --index -1 "Sample finished with errors"
    # The receiver waits no longer than its -t, then says why nothing came.
    [ $((SECONDS - start)) -le 30 ]
    assert_equal "$peer_status" 1
    run echo "$peer_output"
    assert_line --partial "skipped (--no-prepost-receive)"
    assert_line "receiver: step 7 failed: timed out after 8 s waiting for the sender's message, with no receive posted (--no-prepost-receive)"
    assert_line --regexp "^hint: nothing can arrive without a posted receive: .*Failing to submit a receive task prior to the send task results in a fatal failure"
    assert_line --index -1 "Sample finished with errors"
}

@test "rdma_send_receive: a receiver whose sender never starts times out within -t" {
    local start=$SECONDS
    run -1 --separate-stderr "$RECEIVER" $(receiver_paths) -t 2
    [ $((SECONDS - start)) -le 8 ]
    assert_line --partial "waiting up to 2 s for $BATS_TEST_TMPDIR/sender.desc (written by the sender (rdma_send))"
    assert_regex "$stderr" "receiver: step 5 failed: timed out after 2 s waiting for $BATS_TEST_TMPDIR/sender.desc"
    assert_line --index -1 "Sample finished with errors"
}
