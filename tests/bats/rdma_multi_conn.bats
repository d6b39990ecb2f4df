#!/usr/bin/env bats
# rdma_multi_conn: N RC connections in one process, with descriptor files (-nc N) and with RDMA CM
# (-cm: a server and N client processes), in both directions. Run with run-bats --cm (RDMA CM needs
# the device on an Ethernet interface; see test_helper/common.bash, cm_addr).

load test_helper/common

setup() {
    require_rdma_device
    SEND=$(prog rdma_multi_conn_send)
    RECEIVE=$(prog rdma_multi_conn_receive)
    PORT=$((20000 + RANDOM % 20000))
}

# files_flow N: the descriptor flow with N connections, each side one process.
files_flow() {
    local n=$1 T=$BATS_TEST_TMPDIR
    shift
    run_pair "$RECEIVE" -nc "$n" -ld "$T/receiver.desc" -re "$T/sender.desc" -t 30 -- \
        "$SEND" -nc "$n" -ld "$T/sender.desc" -re "$T/receiver.desc" -t 30 "$@"
}

# srq_files_flow N [RECEIVER ARGS...]: the descriptor flow with N connections, the receiver given
# --srq and the extra arguments.
srq_files_flow() {
    local n=$1 T=$BATS_TEST_TMPDIR
    shift
    run_pair "$RECEIVE" -nc "$n" -ld "$T/receiver.desc" -re "$T/sender.desc" -t 30 --srq "$@" -- \
        "$SEND" -nc "$n" -ld "$T/sender.desc" -re "$T/receiver.desc" -t 30
}

@test "rdma_multi_conn files: one connection" {
    files_flow 1
    assert_success
    assert_line 'Sender has sent: "Hi RDMA!", connection 0'
    assert_equal "$peer_status" 0
    assert_peer_line 'Got from sender: "Hi RDMA!", connection 0'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn files: 4 connections, numbered descriptor files, a custom string on each" {
    files_flow 4 -s "four ways"
    assert_success
    assert_equal "$peer_status" 0
    for i in 0 1 2 3; do
        assert_line "Sender has sent: \"four ways\", connection $i"
        assert_peer_line "Got from sender: \"four ways\", connection $i"
    done
    assert_line --partial "$BATS_TEST_TMPDIR/sender.desc-0000"
    assert_peer_line --partial "$BATS_TEST_TMPDIR/sender.desc-0003"
}

@test "rdma_multi_conn files: 16 connections" {
    files_flow 16
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Sender has sent: "Hi RDMA!", connection' <<<"$output")" 16
    assert_equal "$(grep -c '^Got from sender: "Hi RDMA!", connection' <<<"$peer_output")" 16
    assert_peer_line 'Got from sender: "Hi RDMA!", connection 15'
}

# cm_receiving_server N: a receiving server for N senders, N sender clients in the background, each
# with its own string. Afterwards $peer_status/$peer_output are the server's.
cm_receiving_server() {
    local n=$1 i
    shift
    require_cm_addr
    start_peer server "$RECEIVE" -cm -nc "$n" -lp "$PORT" -t 60 "$@"
    wait_listening server
    for ((i = 0; i < n; i++)); do
        start_peer "client$i" "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 60 -s "from client $i"
    done
    for ((i = 0; i < n; i++)); do
        wait_peer "client$i"
        [ "$peer_status" = 0 ] || fail "client $i exited with status $peer_status: $peer_output"
    done
    wait_peer server
}

@test "rdma_multi_conn cm: a receiving server and one sender" {
    cm_receiving_server 1
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "^connection 0 established from $CM_ADDR port [0-9]+$"
    assert_peer_line 'Got from sender: "from client 0", connection 0'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn cm: a receiving server and 4 sender processes, each message arrives once" {
    cm_receiving_server 4
    assert_equal "$peer_status" 0
    for i in 0 1 2 3; do
        assert_peer_line --regexp "^connection $i established from $CM_ADDR port"
        assert_equal "$(grep -c "^Got from sender: \"from client $i\", connection [0-3]$" <<<"$peer_output")" 1
    done
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn cm: a receiving server and 16 sender processes" {
    cm_receiving_server 16
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^connection [0-9]* established from' <<<"$peer_output")" 16
    assert_equal "$(grep -c '^Got from sender: "from client [0-9]*", connection [0-9]*$' <<<"$peer_output")" 16
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn cm: a sending server and 4 receiver processes" {
    require_cm_addr
    local i
    start_peer server "$SEND" -cm -nc 4 -lp "$PORT" -t 60 -s "to every client"
    wait_listening server
    for i in 0 1 2 3; do
        start_peer "client$i" "$RECEIVE" -cm -sa "$CM_ADDR" -lp "$PORT" -t 60
    done
    for i in 0 1 2 3; do
        wait_peer "client$i"
        assert_equal "$peer_status" 0
        assert_peer_line 'Got from sender: "to every client", connection 0'
    done
    wait_peer server
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Sender has sent: "to every client", connection [0-3]$' <<<"$peer_output")" 4
    assert_equal "$(grep -c '^connection [0-3] established from' <<<"$peer_output")" 4
}

@test "rdma_multi_conn cm: -sat gid maps an IPv4-mapped GID to its address" {
    require_cm_addr
    cm_pair "$RECEIVE" -cm -nc 1 -lp "$PORT" -t 60 -- "$SEND" -cm -sa "::ffff:$CM_ADDR" -sat gid -lp "$PORT" -t 60 -s "by gid"
    assert_success
    assert_line --partial "RDMA CM: $CM_ADDR port $PORT is reachable through"
    assert_equal "$peer_status" 0
    assert_peer_line 'Got from sender: "by gid", connection 0'
}

# --- A shared receive queue (--srq) ------------------------------------------------------------------

@test "rdma_multi_conn files --srq: one connection, the memory lines, the SRQ limit event" {
    srq_files_flow 1
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

@test "rdma_multi_conn files --srq: 4 connections on an SRQ of 8, limit 8: the event, the refill" {
    srq_files_flow 4 --srq-size 8 --srq-limit 8
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory without an SRQ: 4 connection(s) x 1 receive x 256 bytes = 1024 bytes"
    assert_peer_line "        receive memory with one SRQ:   8 receives x 256 bytes = 2048 bytes, shared by all 4"
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 8 receives were left in the SRQ"
    for i in 0 1 2 3; do
        assert_peer_line "Got from sender: \"Hi RDMA!\", connection $i"
    done
}

@test "rdma_multi_conn files --srq: 16 connections" {
    srq_files_flow 16
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Got from sender: "Hi RDMA!", connection' <<<"$peer_output")" 16
    assert_peer_line 'Got from sender: "Hi RDMA!", connection 15'
}

@test "rdma_multi_conn files --srq: 64 connections" {
    srq_files_flow 64
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory with one SRQ:   64 receives x 256 bytes = 16384 bytes, shared by all 64"
    assert_equal "$(grep -c '^Got from sender: "Hi RDMA!", connection' <<<"$peer_output")" 64
}

@test "rdma_multi_conn cm --srq: a receiving server and one sender" {
    cm_receiving_server 1 --srq
    assert_equal "$peer_status" 0
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED"
    assert_peer_line 'Got from sender: "from client 0", connection 0'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn cm --srq: a receiving server and 4 sender processes, each message once" {
    cm_receiving_server 4 --srq --srq-limit 4
    assert_equal "$peer_status" 0
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 4 receives"
    for i in 0 1 2 3; do
        assert_equal "$(grep -c "^Got from sender: \"from client $i\", connection [0-3]$" <<<"$peer_output")" 1
    done
}

@test "rdma_multi_conn cm --srq: a receiving server and 16 sender processes" {
    cm_receiving_server 16 --srq
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Got from sender: "from client [0-9]*", connection [0-9]*$' <<<"$peer_output")" 16
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_multi_conn cm --srq: a sending server and a receiver client on an SRQ" {
    require_cm_addr
    cm_pair "$SEND" -cm -nc 1 -lp "$PORT" -t 60 -s "to the SRQ" -- "$RECEIVE" -cm -sa "$CM_ADDR" -lp "$PORT" -t 60 --srq
    assert_success
    assert_line 'Got from sender: "to the SRQ", connection 0'
    assert_equal "$peer_status" 0
}

# rnr_naks: the RNR NAKs the device has sent so far (rxe counts them in send_rnr_err; on one device
# the sender's side counts the same NAKs as rcvd_rnr_err).
rnr_naks() { at_device sh -c 'cat /sys/class/infiniband/*/ports/1/hw_counters/send_rnr_err 2>/dev/null | head -1'; }

@test "rdma_multi_conn files --srq-hold-ms: an empty SRQ answers SENDs with RNR NAKs until the sender gives up" {
    [ -n "$(rnr_naks)" ] || skip "this device shows no send_rnr_err counter"
    local before T=$BATS_TEST_TMPDIR
    before=$(rnr_naks)
    RUN_FLAGS=-1 run_pair "$RECEIVE" -nc 2 -ld "$T/receiver.desc" -re "$T/sender.desc" -t 5 --srq --srq-hold-ms 3000 -- \
        "$SEND" -nc 2 -ld "$T/sender.desc" -re "$T/receiver.desc" -t 30
    assert_line --partial "IBV_WC_RNR_RETRY_EXC_ERR"
    assert_line --partial "hint: "
    # 2 SENDs x (1 try + rnr_retry 6 retries) = 14 RNR NAKs
    assert_equal "$(($(rnr_naks) - before))" 14
    assert_equal "$peer_status" 1
    assert_peer_line --partial "demonstration: leave the SRQ empty for 3000 ms"
}

@test "rdma_multi_conn --srq: bad values are usage errors with a hint" {
    run -2 "$RECEIVE" --srq --srq-size 0
    assert_output --partial "--srq-size"
    run -2 "$RECEIVE" -nc 4 --srq --srq-size 2
    assert_line --partial "--srq-size 2 is smaller than one message per connection (-nc 4)"
    assert_line --partial "hint: pass --srq-size 4 or more"
    run -2 "$RECEIVE" --srq-size 8
    assert_line --partial "apply only with --srq"
    assert_line "hint: add --srq"
    run -2 "$RECEIVE" --srq --srq-size 4 --srq-limit 5
    assert_line --partial "hint: pass --srq-limit 4 or less"
    run -2 "$RECEIVE" -cm --srq --srq-hold-ms 100
    assert_line --partial "descriptor files only"
    run -2 "$SEND" --srq
    assert_line --partial "--srq applies to the receiving side"
    assert_line "hint: pass --srq to rdma_multi_conn_receive"
}

@test "rdma_multi_conn --srq: a device without SRQs (max_srq 0) is refused with a hint" {
    RDMA_SAMPLES_TEST_MAX_SRQ=0 run -2 "$RECEIVE" --srq -t 2
    assert_line --partial "has no shared receive queues (max_srq 0)"
    assert_line "hint: drop --srq: each QP then posts its own receives"
}

@test "rdma_multi_conn --srq: an SRQ larger than the device allows is refused with its limit" {
    run -2 "$RECEIVE" --srq -nc 1 --srq-size 16777216 -t 2
    assert_line --partial "receives in an SRQ (max_srq_wr)"
    assert_line --regexp "^hint: pass --srq-size [0-9]+ or less$"
}
