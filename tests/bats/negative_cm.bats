#!/usr/bin/env bats
# RDMA CM failures: nobody listening, clients that never come, a client killed midway. Each ends in a
# clear error within -t; a server finishes the connections that work. Run with run-bats --cm.

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    SEND=$(prog rdma_multi_conn_send)
    RECEIVE=$(prog rdma_multi_conn_receive)
    PORT=$((20000 + RANDOM % 20000))
}

@test "cm: a client to a port where nobody listens gives up within -t and asks whether the server runs" {
    local start=$SECONDS
    run -1 --separate-stderr "$(prog rdma_write_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 3
    assert [ $((SECONDS - start)) -le 12 ]
    assert_line --partial "nobody listens on $CM_ADDR port $PORT yet; trying again for up to 3 s"
    assert_regex "$stderr" "requester: step 4 failed: waiting for the server to accept: got RDMA_CM_EVENT_REJECTED \(status 8\): nobody listens on $CM_ADDR port $PORT"
    assert_regex "$stderr" "hint: is the server running on $CM_ADDR port $PORT\?"
    assert_line --index -1 "Sample finished with errors"
}

@test "cm: 127.0.0.1 is refused with a hint to use the interface's address" {
    run -1 --separate-stderr "$SEND" -cm -sa 127.0.0.1 -lp "$PORT" -t 5
    assert_regex "$stderr" "sender: step 4 failed: rdma_resolve_route\(127.0.0.1 port $PORT\): No such device"
    assert_regex "$stderr" "hint: RDMA CM cannot use 127.0.0.1 or ::1 on RoCE"
}

@test "cm: a link-local GID with -sat gid is explained" {
    run -1 --separate-stderr "$SEND" -cm -sa fe80::1 -sat gid -lp "$PORT" -t 5
    assert_regex "$stderr" 'is a link-local GID \(fe80::/10\)'
    assert_regex "$stderr" "hint: RDMA CM needs to know which link"
}

@test "cm: a server expecting 3 senders gets 2: it prints both messages, then times out naming how many came" {
    start_peer server "$RECEIVE" -cm -nc 3 -lp "$PORT" -t 8
    wait_listening server
    run "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s first
    cat "$BATS_TEST_TMPDIR/server.out"
    assert_success
    run "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s second
    assert_success
    wait_peer server
    echo "$peer_output"
    assert_equal "$peer_status" 1
    assert_peer_line 'Got from sender: "first", connection 0'
    assert_peer_line 'Got from sender: "second", connection 1'
    assert_peer_line --partial "receiver: step 5 failed: timed out after 8 s without a new sender: 2 of 3 senders connected, 2 of 3 messages arrived"
    assert_peer_line "hint: start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc"
    assert_peer_line --index -1 "Sample finished with errors"
}

@test "cm: a sender killed after connecting: the server finishes the others and reports the lost one" {
    start_peer server "$RECEIVE" -cm -nc 3 -lp "$PORT" -t 30
    wait_listening server
    run "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s "before"
    assert_success
    # A client that connects and never sends: rdma_write_requester waits for a descriptor this server
    # never sends. Kill it once the server has seen it connect.
    start_peer victim "$(prog rdma_write_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 60
    for _ in {1..300}; do
        grep -q '^connection 1 established' "$BATS_TEST_TMPDIR/server.out" && break
        nap 0.1
    done
    # victim.pid is the `timeout` wrapper; kill the requester itself, its only child.
    kill_program KILL "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/victim.pid")")"
    run "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s "after"
    assert_success
    wait_peer server
    assert_equal "$peer_status" 1
    assert_peer_line 'Got from sender: "before", connection 0'
    assert_peer_line 'Got from sender: "after", connection 2'
    assert_peer_line --partial "connection 1 lost: the sender went away (RDMA_CM_EVENT_DISCONNECTED) before its message arrived"
    assert_peer_line --partial "receiver: step 5 failed: 3 of 3 senders connected, 2 of 3 messages arrived; lost: connection 1"
    assert_peer_line --index -1 "Sample finished with errors"
}

@test "cm: a second server on the same port is refused with a hint" {
    # -t 30: the first server's wait spans two starts, the second server's and the sender's, each of
    # which took seconds under CI's load; it ends when the sender comes
    start_peer server "$RECEIVE" -cm -nc 1 -lp "$PORT" -t 30
    wait_listening server
    run -1 --separate-stderr "$RECEIVE" -cm -nc 1 -lp "$PORT" -t 5
    assert_regex "$stderr" "receiver: step 5 failed: rdma_bind_addr\(port $PORT\): "
    assert_regex "$stderr" "hint: another program \(an earlier server\?\) listens on port $PORT"
    "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 >/dev/null
    wait_peer server
    assert_equal "$peer_status" 0
}
