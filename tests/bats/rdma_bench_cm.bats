#!/usr/bin/env bats
# rdma_bench with -cm: every operation in both measurements, small counts, --verify. Run with
# run-bats --cm (RDMA CM needs rxe on an Ethernet interface with an address).

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    PORT=$((20000 + RANDOM % 20000))
}

# cm_bench KNOBS...: the responder listens, the requester connects; same knobs on both sides.
cm_bench() {
    cd "$BATS_TEST_TMPDIR"
    cm_pair "$(prog rdma_bench_responder)" -cm -lp "$PORT" -t 30 "$@" -- \
        "$(prog rdma_bench_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 "$@"
    assert_success
    assert_line --regexp '^Verified: '
    assert_line --partial "step 8: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^Verified: '
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_bench -cm: write bandwidth and latency, verified" {
    cm_bench --op write --mode bw --size 4096 --iters 10 --tx-depth 4 --verify
    cm_bench --op write --mode lat --size 64 --iters 10 --verify
}

@test "rdma_bench -cm: read bandwidth and latency, verified" {
    cm_bench --op read --mode bw --size 4096 --iters 10 --tx-depth 4 --verify
    cm_bench --op read --mode lat --size 64 --iters 10 --verify
}

@test "rdma_bench -cm: send bandwidth and latency, verified" {
    cm_bench --op send --mode bw --size 4096 --iters 10 --tx-depth 4 --verify
    cm_bench --op send --mode lat --size 64 --iters 10 --verify
}

@test "rdma_bench -cm: write with immediate bandwidth and latency, verified" {
    cm_bench --op write_imm --mode bw --size 4096 --iters 10 --tx-depth 4 --verify
    cm_bench --op write_imm --mode lat --size 64 --iters 10 --verify
}

@test "rdma_bench -cm: atomic bandwidth and latency, verified" {
    cm_bench --op atomic --mode bw --iters 10 --tx-depth 4 --verify
    cm_bench --op atomic --mode lat --iters 10 --verify
}

@test "rdma_bench -cm: -q 2 and 4, a connection per QP, each QP's data verified" {
    cm_bench --op write --mode bw --size 4096 --iters 10 --tx-depth 4 -q 4 --verify
    assert_line --regexp '^ +4096 +40 '
    cm_bench --op send --mode bw --size 4096 --iters 10 --tx-depth 4 -q 2 --verify
    assert_peer_line "Responder served 22 messages" # 2 QPs x (10 + 1 warm-up)
}
