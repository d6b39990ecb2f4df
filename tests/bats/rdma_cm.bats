#!/usr/bin/env bats
# -cm on the pairs: the responder listens (no -sa), the requester connects to -sa; the mmap descriptor
# travels in a SEND right after the connection, so no descriptor files are used. Run with run-bats --cm.

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    PORT=$((20000 + RANDOM % 20000))
}

@test "rdma_write -cm: the string crosses over, no descriptor file is written, both sides disconnect" {
    cd "$BATS_TEST_TMPDIR"
    cm_pair "$(prog rdma_write_responder)" -cm -lp "$PORT" -t 30 -ld none.desc -m none.mmap -- \
        "$(prog rdma_write_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -w "over RDMA CM" -ld none2.desc
    assert_success
    assert_line --partial "RDMA CM: $CM_ADDR port $PORT is reachable through"
    assert_line 'Requester has written: "over RDMA CM"'
    assert_line --partial "step 9: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "RDMA CM: connection established from $CM_ADDR port [0-9]+"
    assert_peer_line 'Responder memory now holds: "over RDMA CM"'
    assert_peer_line --index -1 "Sample finished successfully"
    assert [ ! -e none.desc ]
    assert [ ! -e none.mmap ]
    assert [ ! -e none2.desc ]
}

@test "rdma_read -cm: the requester reads the responder's string; the mmap descriptor arrives in-band" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_read_responder)" -cm -lp "$PORT" -t 30 -r "read over RDMA CM" -- \
        "$(prog rdma_read_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30
    assert_success
    assert_line --partial "received the mmap descriptor of the responder (rdma_read_responder), in-band"
    assert_line --regexp 'responder exports addr 0x[0-9a-f]+, length 256, rkey 0x[0-9a-f]+, access local_write[|]remote_read$'
    assert_line 'Read from responder: "read over RDMA CM"'
    assert_line --partial "step 9: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "sent our mmap descriptor in-band"
    assert_peer_line 'Responder memory still holds: "read over RDMA CM"'
    assert_peer_line --partial "step 7: disconnect"
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A)" ""
}

@test "rdma_write_immediate -cm: the write lands and the immediate completes the responder's receive" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_write_immediate_responder)" -cm -lp "$PORT" -t 30 -- \
        "$(prog rdma_write_immediate_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -w "immediate over CM"
    assert_success
    assert_line 'Requester has written: "immediate over CM" with immediate 0xabcd'
    assert_line --partial "step 7: disconnect"
    assert_equal "$peer_status" 0
    assert_peer_line 'Responder memory now holds: "immediate over CM" (17 bytes, immediate 0xabcd)'
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A)" ""
}

@test "rdma_send_receive -cm: no descriptor at all, the connection alone carries the message" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_receive)" -cm -lp "$PORT" -t 30 -- \
        "$(prog rdma_send)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s "sent over RDMA CM"
    assert_success
    assert_line --partial "step 4: connect to the receiver with RDMA CM"
    assert_line 'Sender has sent: "sent over RDMA CM"'
    assert_line --partial "step 7: disconnect"
    refute_line --partial "in-band"
    assert_equal "$peer_status" 0
    assert_peer_line 'Got from sender: "sent over RDMA CM"'
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A)" ""
}

@test "rdma_send_receive_immediate -cm: message and immediate arrive, the CM's REP replaced the receiver's file" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_receive_immediate)" -cm -lp "$PORT" -t 30 -- \
        "$(prog rdma_send_immediate)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -s "imm over RDMA CM"
    assert_success
    assert_line --partial "step 4: connect to the receiver with RDMA CM"
    assert_line "RDMA send with immediate task was done successfully"
    assert_line --partial "step 7: disconnect"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "step 5: wait for the sender to connect with RDMA CM"
    assert_peer_line 'Got from sender: "imm over RDMA CM" with immediate: 0xabcd'
    assert_peer_line --partial "step 8: disconnect"
    assert_equal "$(ls -A)" ""
}

@test "rdma_atomic -cm: fetch-and-add and compare-and-swap on a counter whose descriptor came in-band" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_atomic_responder)" -cm -lp "$PORT" -t 30 --initial 40 -- \
        "$(prog rdma_atomic_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 --add 2 --swap 7
    assert_success
    assert_line "Fetch-and-add: old value 40, new value 42"
    assert_line --partial "step 9: disconnect"
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^Final counter value: 7 '
    assert_peer_line --partial "step 7: disconnect"
    assert_equal "$(ls -A)" ""
}

@test "rdma_sync_event -cm: set, get and the completion value over a connection made by RDMA CM" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd" # stays empty: -cm writes no file
    cm_pair "$(prog rdma_sync_event_responder)" -cm -lp "$PORT" -t 30 -- \
        "$(prog rdma_sync_event_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30
    assert_success
    assert_line --partial "received the sync_event descriptor of the responder (rdma_sync_event_responder), in-band"
    assert_line "Received sync event value 0xd0cb"
    assert_line "Remote sync event has been notified for completion successfully"
    assert_line --partial "step 9: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "sent our sync_event descriptor in-band"
    assert_peer_line "Sync event value 0xd0ca received"
    assert_peer_line "Sync event completion value 0xffffffffffffffff received"
    assert_peer_line --partial "step 10: disconnect"
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A)" ""
}

# The ACK of the responder's descriptor SEND arrives late, so the requester's next message (its WRITE
# with immediate, or its goodbye) completes first on the responder's CQ. Soft-RoCE on one machine never
# delays an ACK, so RDMA_SAMPLES_TEST_REORDER_CQ=MS makes every wait sleep, then hand what the CQ holds
# to the sorting newest first: the order a NIC may give. Each wait must still find its own completion
# by wr_id (completions.hpp); -v shows that two completions were reordered.
reordered_pair() {
    local server=$1 client=$2
    shift 2
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd"
    cm_pair env RDMA_SAMPLES_TEST_REORDER_CQ=1500 "$(prog "$server")" -cm -lp "$PORT" -t 30 -v -- \
        env RDMA_SAMPLES_TEST_REORDER_CQ=300 "$(prog "$client")" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 "$@"
    assert_success
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_write -cm: the goodbye completes before the descriptor SEND's completion; both waits find theirs" {
    reordered_pair rdma_write_responder rdma_write_requester -w "late ACK"
    assert_peer_line "  [verbs] test: 2 completions kept newest first"
    assert_peer_line 'Responder memory now holds: "late ACK"'
}

@test "rdma_read -cm: the goodbye completes first on the responder; the READ still succeeds" {
    reordered_pair rdma_read_responder rdma_read_requester
    assert_peer_line "  [verbs] test: 2 completions kept newest first"
}

@test "rdma_write_immediate -cm: the immediate completes before the descriptor SEND's completion" {
    reordered_pair rdma_write_immediate_responder rdma_write_immediate_requester -w "late ACK"
    assert_peer_line "  [verbs] test: 2 completions kept newest first"
    assert_peer_line 'Responder memory now holds: "late ACK" (8 bytes, immediate 0xabcd)'
}

@test "rdma_atomic -cm: the goodbye completes first on the responder; the counter is right" {
    reordered_pair rdma_atomic_responder rdma_atomic_requester --add 2 --swap 7
    assert_peer_line "  [verbs] test: 2 completions kept newest first"
    assert_peer_line --regexp '^Final counter value: 7 '
}

# The sync-event flow needs the responder between the requester's steps, so its goodbye cannot come
# before the descriptor SEND's completion; the reordered waits must still all succeed.
@test "rdma_sync_event -cm: every wait delayed and reordered, the flow still completes" {
    reordered_pair rdma_sync_event_responder rdma_sync_event_requester
    assert_peer_line "Sync event completion value 0xffffffffffffffff received"
}

@test "rdma_send_receive and the immediate pair -cm: one completion per side, delayed, still found" {
    reordered_pair rdma_receive rdma_send -s "late"
    assert_peer_line 'Got from sender: "late"'
    cd "$BATS_TEST_TMPDIR" && rm -rf cwd
    PORT=$((PORT + 1))
    reordered_pair rdma_receive_immediate rdma_send_immediate -s "late"
    assert_peer_line 'Got from sender: "late" with immediate: 0xabcd'
}

@test "-cm and descriptor files give the QP the same timers (-v prints what the QP holds)" {
    mkdir "$BATS_TEST_TMPDIR/cwd" && cd "$BATS_TEST_TMPDIR/cwd"
    local timers='^  \[verbs\] QP 0x[0-9a-f]{6}: timeout 14, retry_cnt 6, rnr_retry 6, min_rnr_timer 12'
    local requester="$timers, max_rd_atomic [1-9][0-9]*, max_dest_rd_atomic 0, path_mtu [0-9]+$"
    local responder="$timers, max_rd_atomic 0, max_dest_rd_atomic [1-9][0-9]*, path_mtu [0-9]+$"
    cm_pair "$(prog rdma_read_responder)" -cm -lp "$PORT" -t 30 -v -- \
        "$(prog rdma_read_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -v
    assert_success
    assert_line --regexp "$requester"
    assert_peer_line --regexp "$responder"
    run_pair "$(prog rdma_read_responder)" $(responder_paths) -t 30 -v -- \
        "$(prog rdma_read_requester)" $(requester_paths) -t 30 -v
    assert_success
    assert_line --regexp "$requester"
    assert_peer_line --regexp "$responder"
}
