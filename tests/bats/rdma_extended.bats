#!/usr/bin/env bats
# rdma_extended: the six RC operations of chapters 2 to 7 through the extended verbs API (ibv_wr_*() in
# two batches, completions read from extended CQs), by descriptor files and by RDMA CM; what the device
# refuses at creation (completion timestamps on Soft-RoCE) and what the requester refuses to post.
# Run with run-bats --cm (the RDMA CM test needs the device on an interface with an address).

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_extended_requester)
    RESPONDER=$(prog rdma_extended_responder)
    FORTY=0123456789012345678901234567890123456789 # the longest -w
}

# every_operation_arrived TEXT: the responder's lines for a run whose -w was TEXT, the default --add and
# --swap.
every_operation_arrived() {
    assert_equal "$peer_status" 0
    assert_peer_line "WRITE with immediate 0xabcd: $((${#1} + 17)) bytes, \"$1 (with immediate)\""
    assert_peer_line 'SEND: 23 bytes, "sent with ibv_wr_send()"'
    assert_peer_line "WRITE: \"$1\""
    assert_peer_line "Counter after the requester's atomics: 100"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "extended: one batch of five operations, then compare-and-swap and the goodbye; each completion in order" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line "step 5: post WRITE, WRITE with immediate, SEND, READ and fetch-and-add in one batch"
    assert_line "        the RDMA WRITE completed: IBV_WC_RDMA_WRITE"
    assert_line "        the RDMA WRITE with immediate completed: IBV_WC_RDMA_WRITE"
    assert_line "        the SEND completed: IBV_WC_SEND"
    assert_line "        the RDMA READ completed: IBV_WC_RDMA_READ, 8 bytes fetched"
    assert_line "        the fetch-and-add completed: IBV_WC_FETCH_ADD, 8 bytes fetched"
    assert_line 'READ brought back: "Hi RDMA!"'
    assert_line "Fetch-and-add: old value 0, new value 5"
    assert_line "Compare-and-swap: found 5, swapped"
    assert_line "Expected final counter value: 100"
    assert_line --index -1 "Sample finished successfully"
    every_operation_arrived "Hi RDMA!"
}

@test "extended: -w, --add and --swap reach the responder's memory" {
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 -w "$FORTY" --add 2 --swap 7
    assert_success
    assert_line "READ brought back: \"$FORTY\""
    assert_line "Fetch-and-add: old value 0, new value 2"
    assert_line "Compare-and-swap: found 2, swapped"
    assert_peer_line "WRITE: \"$FORTY\""
    assert_peer_line "WRITE with immediate 0xabcd: 57 bytes, \"$FORTY (with immediate)\""
    assert_peer_line "Counter after the requester's atomics: 7"
}

@test "extended -cm: the same operations after an RDMA CM connection" {
    require_cm_addr
    PORT=$((20000 + RANDOM % 20000))
    cm_pair "$RESPONDER" -cm -lp "$PORT" -t 30 -- "$REQUESTER" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -w "over RDMA CM"
    assert_success
    assert_line 'READ brought back: "over RDMA CM"'
    assert_line "Expected final counter value: 100"
    assert_line "step 8: disconnect: RDMA CM tells the responder we are done"
    every_operation_arrived "over RDMA CM"
}

@test "extended: --timestamps: Soft-RoCE cannot stamp completions, and ibv_create_cq_ex() says so at step 3" {
    run "$REQUESTER" $(requester_paths) -t 5 --timestamps
    grep -q "^        device rxe" <<<"$output" || skip "a statement about Soft-RoCE: $(grep -m1 '        device ' <<<"$output")"
    assert_failure 1
    assert_line --regexp "^requester: step 3 failed: ibv_create_cq_ex failed: Operation not supported: device rxe[0-9]+ cannot stamp completions \\(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP\\)$"
    assert_line "hint: run without --timestamps; a NIC that stamps completions says so in ibv_query_device_ex()'s completion_timestamp_mask"
    refute_line --partial "step 4:"
}

@test "extended: a -w longer than the slots is refused before anything is registered" {
    run -1 "$REQUESTER" $(requester_paths) -t 5 -w "${FORTY}x"
    assert_line "requester: step 2 failed: -w is 41 bytes; this pair's slots take 40"
    assert_line "hint: write a shorter string with -w"
}

@test "extended: a responder that exports too little, or without remote read and atomic, is refused before any post" {
    # rdma_write_responder exports 256 bytes with remote write only
    RUN_FLAGS=-1 PEER_TIMEOUT=30 run_pair "$(prog rdma_write_responder)" $(responder_paths) -t 5 -- "$REQUESTER" $(requester_paths) -t 20
    assert_line "requester: step 4 failed: the responder exports 256 bytes, access local_write|remote_write: not the 136-byte, 8-byte aligned region with remote write, read and atomic this pair needs"
    assert_line "hint: run rdma_extended_responder on the other side"
    refute_line --partial "step 5:"
}

# RDMA atomic write: Soft-RoCE has it from Linux 6.2. The suite runs on the VM's default kernel (Debian
# 12's 6.1), and again on 6.12 (RDMA_SAMPLES_VM_KERNEL=6.12, the meson test rdma_extended_6.12).
kernel_has_atomic_write() { [ "${RDMA_SAMPLES_VM_KERNEL:-}" = 6.12 ]; }

@test "extended: --atomic-write: on 6.12 the counter holds the value written; on 6.1 step 1 refuses and names the kernel" {
    if kernel_has_atomic_write; then
        run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20 --atomic-write 0x1122334455667788
        assert_success
        assert_line "Compare-and-swap: found 5, swapped"
        assert_line "Atomic write: 1234605616436508552 placed"
        assert_line "Expected final counter value: 1234605616436508552"
        assert_peer_line "Counter after the requester's atomics: 1234605616436508552"
        assert_peer_line --index -1 "Sample finished successfully"
    else
        run -1 "$REQUESTER" $(requester_paths) -t 5 --atomic-write 7
        assert_line --regexp "^requester: step 1 failed: device [a-z0-9_]+ cannot do RDMA atomic write \(bit 40 of device_cap_flags_ex, IB_UVERBS_DEVICE_ATOMIC_WRITE, is clear; Soft-RoCE sets it from Linux 6\.2, this kernel is 6\.1\.[^)]*\)$"
        assert_line "hint: run without --atomic-write, or on a kernel whose rxe has it (./lab vm --kernel 6.12)"
    fi
}

@test "extended: --atomic-write --ignore-capability on 6.1: the atomic write fails with IBV_WC_LOC_QP_OP_ERR, and the goodbye behind it never arrives" {
    kernel_has_atomic_write && skip "a statement about Linux 6.1's rxe"
    RUN_FLAGS=-1 PEER_TIMEOUT=30 run_pair "$RESPONDER" $(responder_paths) -t 6 -- "$REQUESTER" $(requester_paths) -t 20 --atomic-write 7 --ignore-capability
    assert_line --partial "(demonstration) device"
    assert_line "Compare-and-swap: found 5, swapped"
    assert_line --regexp "^requester: step 7 failed: the RDMA atomic write completed with IBV_WC_LOC_QP_OP_ERR"
    assert_equal "$peer_status" 1
    assert_peer_line "responder: step 6 failed: timed out after 6 s waiting for the requester's goodbye"
}

@test "extended: --ignore-capability alone is a usage error" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --ignore-capability
    assert_equal "$stderr" "rdma_extended_requester: --ignore-capability: only with --atomic-write
hint: add --atomic-write N, or leave it out"
}
