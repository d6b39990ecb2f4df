#!/usr/bin/env bats
# rdma_atomic: fetch-and-add and compare-and-swap on the responder's 64-bit counter.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_atomic_requester)
    RESPONDER=$(prog rdma_atomic_responder)
}

@test "atomic: both operations with defaults; the requester's expectation is the responder's final value" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line "Fetch-and-add: old value 0, new value 1"
    assert_line "Compare-and-swap: found 1, swapped"
    assert_line "Expected final counter value: 100"
    assert_equal "$peer_status" 0
    assert_peer_line "Final counter value: 100 (0x64)"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "atomic: --initial 40 --add 2 gives 40 -> 42; compare-swap 42 -> 7 swaps" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 --initial 40 -- "$REQUESTER" $(requester_paths) -t 20 --add 2 --swap 7
    assert_success
    assert_line "Fetch-and-add: old value 40, new value 42"
    assert_line "Compare-and-swap: found 42, swapped"
    assert_equal "$(grep -o 'Expected final counter value: [0-9]*' <<<"$output" | grep -o '[0-9]*$')" 7
    assert_equal "$peer_status" 0
    assert_peer_line "Final counter value: 7 (0x7)"
}

@test "atomic: a compare-and-swap that does not match leaves the counter alone" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 --initial 5 -- "$REQUESTER" $(requester_paths) -t 20 --op compare-swap --compare 6 --swap 9
    assert_success
    refute_line --partial "Fetch-and-add"
    assert_line "Compare-and-swap: found 5, not swapped"
    assert_line "Expected final counter value: 5"
    assert_peer_line "Final counter value: 5 (0x5)"
}

@test "atomic: fetch-and-add alone, with a 64-bit value that wraps" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 --initial 0xffffffffffffffff -- "$REQUESTER" $(requester_paths) -t 20 --op fetch-add --add 2
    assert_success
    assert_line "Fetch-and-add: old value 18446744073709551615, new value 1"
    assert_peer_line "Final counter value: 1 (0x1)"
}

@test "atomic: byte order: the counter and the old value are plain host-order 64-bit integers" {
    # 0x0102030405060708: every byte differs, so a swapped order would show.
    run_pair "$RESPONDER" $(responder_paths) -t 20 --initial 0x0102030405060708 -- "$REQUESTER" $(requester_paths) -t 20 --op fetch-add --add 0x10
    assert_success
    assert_line "Fetch-and-add: old value 72623859790382856, new value 72623859790382872"
    # x86 is little-endian: the least significant byte comes first in memory.
    assert_line --partial "the old value as stored in our buffer, byte by byte: 08 07 06 05 04 03 02 01 = 0x0102030405060708"
    assert_peer_line "Final counter value: 72623859790382872 (0x102030405060718)"
}

@test "atomic: compare-and-swap alone compares with 0 by default" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 --op compare-swap
    assert_success
    # One operation: the steps stay consecutive (no step 6 skipped for the fetch-and-add not asked for).
    assert_line "step 6: post an atomic compare-and-swap: if the counter is 0, make it 100"
    assert_line "step 7: say goodbye with a zero-length SEND, so the responder may read its counter"
    assert_line "Compare-and-swap: found 0, swapped"
    assert_peer_line "Final counter value: 100 (0x64)"
}

@test "atomic: the requester refuses a counter without remote atomic before posting" {
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 8 --no-atomic-access -- "$REQUESTER" $(requester_paths) -t 20
    assert_line --partial "requester: step 5 failed: the responder's memory does not grant remote atomic (access local_write)"
    assert_line --partial "hint: the responder must register its counter with IBV_ACCESS_REMOTE_ATOMIC"
    refute_line --partial "step 6:"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "(demonstration) the counter grants no remote atomic: access local_write"
}

@test "atomic: posted anyway, an atomic on memory without remote atomic is refused by the responder" {
    RUN_FLAGS=-1 run_pair "$RESPONDER" $(responder_paths) -t 8 --no-atomic-access -- "$REQUESTER" $(requester_paths) -t 20 --ignore-access
    assert_line --partial "(demonstration) the export grants local_write, no remote atomic: posting anyway"
    # The QP grants remote atomic, the memory region does not: the responder's device refuses access.
    assert_line --partial "requester: step 6 failed: the fetch-and-add completed with IBV_WC_REM_ACCESS_ERR"
    assert_line --partial "hint: the peer refused access: check the rkey, that address and length lie inside the exported range, and that the peer granted this operation's remote permission (write, read or atomic) on its memory and QP"
    refute_line --partial "Fetch-and-add: old value"
    assert_line --index -1 "Sample finished with errors"
    # The refused atomic broke the connection: the responder's goodbye receive is flushed.
    assert_equal "$peer_status" 1
    assert_peer_line --partial "responder: step 6 failed: the requester's goodbye (a zero-length SEND after its atomics) completed with IBV_WC_WR_FLUSH_ERR"
    refute_peer_line --partial "Final counter value"
}

@test "atomic: an unaligned remote address is refused before posting" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/responder.desc" -re "$T/requester.desc" -m "$T/real.desc" -t 8
    # The counter is page-aligned, so its address ends in 0: make it end in 4.
    spoil_in_flight "$T/real.desc" "$T/resource.desc" 's/^\(addr=0x.*\)0$/\14/'
    run -1 --separate-stderr timeout 60 "$REQUESTER" -ld "$T/requester.desc" -re "$T/responder.desc" -m "$T/resource.desc" -t 20
    stop_peer responder
    assert_regex "$stderr" "requester: step 5 failed: remote address 0x[0-9a-f]*4 is not 8-byte aligned; nothing was posted"
    assert_regex "$stderr" "hint: atomics work on a naturally aligned 64-bit word"
    refute_line --partial "step 6:"
}

@test "atomic: a bad --op is a usage error" {
    run -2 --separate-stderr "$REQUESTER" --op multiply
    assert_equal "$stderr" 'rdma_atomic_requester: --op: expected fetch-add, compare-swap or both, got "multiply"'
}
