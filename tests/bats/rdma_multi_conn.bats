#!/usr/bin/env bats
# rdma_multi_conn: N RC connections in one process, with descriptor files (-nc N) and with RDMA CM
# (-cm: a server and N client processes), in both directions. Run with run-bats --cm (RDMA CM needs
# the device on an Ethernet interface; see test_helper/common.bash, cm_addr).

load test_helper/common
load test_helper/multi_conn

setup() {
    require_rdma_device
    SEND=$(prog rdma_multi_conn_send)
    RECEIVE=$(prog rdma_multi_conn_receive)
    PORT=$((20000 + RANDOM % 20000))
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
    files_flow 4 -- -s "four ways"
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
