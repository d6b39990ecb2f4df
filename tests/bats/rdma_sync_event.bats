#!/usr/bin/env bats
# rdma_sync_event: a 64-bit event the requester sets (RDMA WRITE) and gets (RDMA READ).

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_sync_event_requester)
    RESPONDER=$(prog rdma_sync_event_responder)
}

@test "sync_event: both sides follow DOCA's value sequence 0xd0ca, 0xd0cb, UINT64_MAX" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line "Received sync event value 0xd0cb"
    assert_line "Remote sync event has been notified for completion successfully"
    assert_line --index -1 "Sample finished successfully"
    # The requester prints each value it reads that differs from the last: here only 0xd0cb.
    assert_equal "$(grep -c '^Received sync event value' <<<"$output")" 1
    assert_equal "$peer_status" 0
    # The responder's result lines, in order.
    assert_equal "$(grep -E '^(Sync event|Signaling)' <<<"$peer_output")" "Sync event value 0xd0ca received
Signaling sync event
Sync event completion value 0xffffffffffffffff received"
    assert_peer_line --partial "access local_write|remote_write|remote_read"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "sync_event: a responder that never signals makes the requester's get time out, explained" {
    local start=$SECONDS
    # The responder outlasts the requester's -t: if it gave up first, its QP would go and the requester's
    # READ would end in IBV_WC_RETRY_EXC_ERR instead of the bounded get this test is about.
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 12 --never-signal -- "$REQUESTER" $(requester_paths) -t 6
    assert [ $((SECONDS - start)) -le 30 ]
    assert_line --partial "requester: step 6 failed: timed out after 6 s waiting for the sync event to pass 0xd0ca (the responder signals 0xd0cb)"
    assert_line --partial "hint: the responder is stopped or gone; check its output"
    refute_line --partial "Received sync event value"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "responder: step 7 failed: timed out after 12 s waiting for the sync event to reach 0xd0cb"
}

@test "sync_event: a stopped responder cannot signal; the get is bounded by -t" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/real-responder.desc" -re "$T/requester.desc" -m "$T/real.desc" -t 30
    # Stand between the two: once the responder has answered, stop it, then hand its answer on. Its
    # device still serves the READs, but its CPU never moves the value on.
    (
        for _ in {1..600}; do [ -f "$T/real-responder.desc" ] && break; nap 0.05; done
        at_device pkill -STOP -f "rdma_sync_event_responder -ld $T/real-responder.desc"
        mv "$T/real.desc" "$T/resource.desc" && mv "$T/real-responder.desc" "$T/responder.desc"
    ) 3>&- &
    run -1 --separate-stderr timeout 60 "$REQUESTER" $(requester_paths) -t 5
    at_device pkill -CONT -f "rdma_sync_event_responder -ld $T/real-responder.desc" || true
    at_device pkill -TERM -f "rdma_sync_event_responder -ld $T/real-responder.desc" || true
    wait_peer responder
    refute_output --partial "Received sync event value"
    assert_regex "$stderr" "requester: step 6 failed: timed out after 5 s waiting for the sync event to pass 0xd0ca"
}

@test "sync_event: a descriptor with the wrong length is refused before posting" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/responder.desc" -re "$T/requester.desc" -m "$T/real.desc" -t 8
    spoil_in_flight "$T/real.desc" "$T/resource.desc" 's/^length=.*/length=16/'
    run -1 --separate-stderr timeout 60 "$REQUESTER" $(requester_paths) -t 20
    stop_peer responder
    assert_regex "$stderr" "requester: step 4 failed: the sync-event descriptor says 16 bytes; a sync event is one 8-byte word; nothing was posted"
    assert_regex "$stderr" "hint: the responder must export exactly its 8-byte counter"
}

@test "sync_event: an unaligned event address is refused before posting" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/responder.desc" -re "$T/requester.desc" -m "$T/real.desc" -t 8
    spoil_in_flight "$T/real.desc" "$T/resource.desc" 's/^\(addr=0x.*\)0$/\14/'
    run -1 --separate-stderr timeout 60 "$REQUESTER" $(requester_paths) -t 20
    stop_peer responder
    assert_regex "$stderr" "requester: step 4 failed: the sync event's address is not 8-byte aligned; nothing was posted"
}

@test "sync_event: a mmap descriptor given where a sync event is expected is rejected" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/responder.desc" -re "$T/requester.desc" -m "$T/real.desc" -t 8
    spoil_in_flight "$T/real.desc" "$T/resource.desc" 's/^kind=.*/kind=mmap/'
    run -1 --separate-stderr timeout 60 "$REQUESTER" $(requester_paths) -t 20
    stop_peer responder
    assert_regex "$stderr" "resource.desc line 3: kind: expected sync_event, got \"mmap\""
}
