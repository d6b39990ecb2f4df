#!/usr/bin/env bats
# rdma_srq: N RC connections whose QPs take their receives from one shared receive queue, with
# descriptor files (-nc N) and with RDMA CM (-cm: the receiver is a server for N sender processes); the
# senders are rdma_multi_conn_send's. Run with run-bats --cm (RDMA CM needs the device on an Ethernet
# interface; see test_helper/common.bash, cm_addr).

load test_helper/common
load test_helper/multi_conn

setup() {
    require_rdma_device
    SEND=$(prog rdma_multi_conn_send)
    RECEIVE=$(prog rdma_srq_receive)
    PORT=$((20000 + RANDOM % 20000))
}

@test "rdma_srq files: one connection, the memory lines, the SRQ limit event" {
    files_flow 1
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory without an SRQ: 1 connection(s) x 1 receive x 256 bytes = 256 bytes"
    assert_peer_line "        receive memory with one SRQ:   1 receives x 256 bytes = 256 bytes, shared by all 1"
    assert_peer_line "step 4: post 1 receives into the SRQ, arm its limit at 1"
    assert_peer_line --regexp '^step 6: sleep on the completion channel'
    # the one receive was taken: fewer than 1 left, the event fires (deterministic)
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 1 receives were left in the SRQ"
    assert_peer_line 'Got from sender: "Hi RDMA!", connection 0'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_srq files: 4 connections on an SRQ of 8, limit 8: the event, the refill" {
    files_flow 4 --srq-size 8 --srq-limit 8
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory without an SRQ: 4 connection(s) x 1 receive x 256 bytes = 1024 bytes"
    assert_peer_line "        receive memory with one SRQ:   8 receives x 256 bytes = 2048 bytes, shared by all 4"
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 8 receives were left in the SRQ"
    for i in 0 1 2 3; do
        assert_peer_line "Got from sender: \"Hi RDMA!\", connection $i"
    done
}

@test "rdma_srq files: 16 connections" {
    files_flow 16
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Got from sender: "Hi RDMA!", connection' <<<"$peer_output")" 16
    assert_peer_line 'Got from sender: "Hi RDMA!", connection 15'
}

@test "rdma_srq files: 64 connections" {
    files_flow 64
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory with one SRQ:   64 receives x 256 bytes = 16384 bytes, shared by all 64"
    assert_equal "$(grep -c '^Got from sender: "Hi RDMA!", connection' <<<"$peer_output")" 64
}

@test "rdma_srq cm: a receiving server and one sender" {
    cm_receiving_server 1
    assert_equal "$peer_status" 0
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED"
    assert_peer_line 'Got from sender: "from client 0", connection 0'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_srq cm: a receiving server and 4 sender processes, each message once" {
    cm_receiving_server 4 --srq-limit 4
    assert_equal "$peer_status" 0
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 4 receives"
    for i in 0 1 2 3; do
        assert_equal "$(grep -c "^Got from sender: \"from client $i\", connection [0-3]$" <<<"$peer_output")" 1
    done
}

@test "rdma_srq cm: a receiving server and 16 sender processes" {
    cm_receiving_server 16
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Got from sender: "from client [0-9]*", connection [0-9]*$' <<<"$peer_output")" 16
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_srq cm: the receiver is a server only; -sa is a usage error with a hint" {
    run -2 "$RECEIVE" -cm -sa 10.77.0.1
    assert_line --partial "-sa: rdma_srq_receive is a server only"
    assert_line "hint: drop -sa; for a receiving client see rdma_multi_conn_receive -cm -sa ADDR"
}

@test "rdma_srq files --srq-hold-ms: an empty SRQ answers SENDs with RNR NAKs until the sender gives up" {
    [ -n "$(rnr_naks)" ] || skip "this device shows no send_rnr_err counter"
    local before T=$BATS_TEST_TMPDIR
    before=$(rnr_naks)
    # One connection: the sender exits at its first failed completion, so a second SEND's QP would be
    # destroyed mid-retry and its NAK count would depend on the timing.
    RUN_FLAGS=-1 run_pair "$RECEIVE" -nc 1 -ld "$T/receiver.desc" -re "$T/sender.desc" -t 5 --srq-hold-ms 3000 -- \
        "$SEND" -nc 1 -ld "$T/sender.desc" -re "$T/receiver.desc" -t 30
    assert_line --partial "IBV_WC_RNR_RETRY_EXC_ERR"
    assert_line --partial "hint: "
    # 1 SEND x (1 try + rnr_retry 6 retries) = 7 RNR NAKs
    assert_equal "$(($(rnr_naks) - before))" 7
    assert_equal "$peer_status" 1
    assert_peer_line --partial "demonstration: leave the SRQ empty for 3000 ms"
}

@test "rdma_srq: bad values are usage errors with a hint" {
    run -2 "$RECEIVE" --srq-size 0
    assert_output --partial "--srq-size"
    run -2 "$RECEIVE" -nc 4 --srq-size 2
    assert_line --partial "--srq-size 2 is smaller than one message per connection (-nc 4)"
    assert_line --partial "hint: pass --srq-size 4 or more"
    run -2 "$RECEIVE" --srq-size 4 --srq-limit 5
    assert_line --partial "hint: pass --srq-limit 4 or less"
    run -2 "$RECEIVE" -cm --srq-hold-ms 100
    assert_line --partial "descriptor files only"
    run -2 "$SEND" --srq
    assert_line --partial "--srq applies to the receiving side"
    assert_line "hint: run rdma_srq_receive as the receiver; this sender stays as it is"
    run -2 "$(prog rdma_multi_conn_receive)" --srq
    assert_output --partial "--srq"
}

@test "rdma_srq: a device without SRQs (max_srq 0) is refused with a hint" {
    RDMA_SAMPLES_TEST_MAX_SRQ=0 run -1 "$RECEIVE" -t 2
    assert_line --partial "has no shared receive queues (max_srq 0)"
    assert_line "hint: use rdma_multi_conn_receive: each QP then posts its own receives"
}

@test "rdma_srq: an SRQ larger than the device allows is refused with its limit" {
    run -2 "$RECEIVE" -nc 1 --srq-size 16777216 -t 2
    assert_line --partial "receives in an SRQ (max_srq_wr)"
    assert_line --regexp "^hint: pass --srq-size [0-9]+ or less$"
}
