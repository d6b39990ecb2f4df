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
    require_cm_addr
    start_peer server "$RECEIVE" -cm -nc "$n" -lp "$PORT" -t 60
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
