#!/usr/bin/env bats
# rdma_send_receive: the sender's message fills a receive the receiver posted first.

load test_helper/common

setup() {
    require_rdma_device
    SENDER=$(prog rdma_send)
    RECEIVER=$(prog rdma_receive)
}

sender_paths() { echo -ld "$BATS_TEST_TMPDIR/sender.desc" -re "$BATS_TEST_TMPDIR/receiver.desc"; }
receiver_paths() { echo -ld "$BATS_TEST_TMPDIR/receiver.desc" -re "$BATS_TEST_TMPDIR/sender.desc"; }

@test "send_receive: the default message arrives" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20
    assert_success
    assert_line 'Submitting RDMA send task that sends "Hi RDMA!" to receiver'
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line 'Got from sender: "Hi RDMA!"'
    # The receiver got the last message: it keeps its QP while a lost ACK could make the sender resend.
    assert_peer_line "step 7: keep the QP a moment: if our ACK of the message was lost, the sender resends it"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "send_receive: custom and 256-byte messages arrive byte for byte" {
    local msg
    for msg in 'two-sided: "the receiver chose the buffer"' "$(printf 'abcdefgh%.0s' {1..32})"; do
        run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "$msg"
        assert_success
        assert_equal "$peer_status" 0
        assert_equal "$(quoted 'Got from sender:' "$peer_output")" "$msg"
    done
}

@test "send_receive: an empty message is legal and consumes the receive" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s ""
    assert_success
    assert_line 'Submitting RDMA send task that sends "" to receiver'
    assert_equal "$peer_status" 0
    assert_peer_line 'Got from sender: ""'
}

@test "send_receive: a message longer than the posted receive fails on both sides, explained" {
    RUN_FLAGS=-1 run_pair "$RECEIVER" $(receiver_paths) -t 20 --recv-size 4 -- "$SENDER" $(sender_paths) -t 20
    # IBTA devices NAK a too-long SEND "Invalid Request" (IBV_WC_REM_INV_REQ_ERR); Soft-RoCE answers
    # "Remote Operational Error" (IBV_WC_REM_OP_ERR). Each hint names the receive buffer.
    assert_line --regexp "^sender: step 6 failed: the SEND completion completed with IBV_WC_(REM_INV_REQ_ERR|REM_OP_ERR)"
    assert_line --regexp "^hint: .*(longer than its receive buffer|a SEND longer than the peer's receive buffer this way \(IBTA devices say IBV_WC_REM_INV_REQ_ERR\))"
    assert_equal "$peer_status" 1
    # mlx5 reports IBV_WC_LOC_LEN_ERR; Soft-RoCE and qib report IBV_WC_LOC_QP_OP_ERR. Both hints say why.
    assert_peer_line --regexp "^receiver: step 6 failed: the message from the sender completed with IBV_WC_(LOC_LEN_ERR|LOC_QP_OP_ERR)"
    assert_peer_line --regexp "^hint: .*longer than the receive buffer"
}

@test "send_receive: a SEND with no receive posted fails with RNR retry exceeded" {
    RUN_FLAGS=-1 run_pair "$RECEIVER" $(receiver_paths) -t 8 --no-prepost-receive -- "$SENDER" $(sender_paths) -t 20
    assert_line --partial "sender: step 6 failed: the SEND completion completed with IBV_WC_RNR_RETRY_EXC_ERR"
    assert_line --partial "hint: the peer had no receive posted (Receiver Not Ready): the receiving side must post its receive before the sender sends"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "(demonstration) post NO receive"
    assert_peer_line --partial "receiver: step 6 failed: timed out after 8 s waiting for the message from the sender"
}

@test "send_receive: --recv-size out of range is a usage error" {
    run -2 --separate-stderr "$RECEIVER" --recv-size 0
    assert_equal "$stderr" 'rdma_receive: --recv-size: expected a number from 1 to 256, got "0"'
}
