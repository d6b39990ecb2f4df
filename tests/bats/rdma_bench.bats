#!/usr/bin/env bats
# rdma_bench: every operation in both measurements, small counts, --verify, on one device (descriptor
# files; rdma_bench_cm.bats has the -cm flow). Timings are never asserted: only the table's shape.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_bench_requester)
    RESPONDER=$(prog rdma_bench_responder)
}

# bench KNOBS...: run the pair with the same knobs on both sides; the requester's result in $output.
bench() {
    run_pair "$RESPONDER" $(responder_paths) -t 20 "$@" -- "$REQUESTER" $(requester_paths) -t 20 "$@"
}

# assert_bw_rows N / assert_lat_rows N: the table has a header and N rows of numbers.
assert_bw_rows() {
    assert_line --regexp '^ +bytes +iterations +MB/s +Gb/s +Mmsg/s +user_us/op +sys_us/op$'
    assert_equal "$(grep -cE '^ +[0-9]+ +[0-9]+( +[0-9.]+){5}$' <<<"$output")" "$1"
}
assert_lat_rows() {
    assert_line --regexp '^ +bytes +iterations +min_us +median_us +p99_us +p99.9_us +max_us +user_us/op +sys_us/op$'
    assert_equal "$(grep -cE '^ +[0-9]+ +[0-9]+( +[0-9.]+){7}$' <<<"$output")" "$1"
}

assert_both_verified() {
    assert_success
    assert_line --regexp '^Verified: '
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^Verified: '
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_bench: write bandwidth, verified" {
    bench --op write --mode bw --size 4096 --iters 20 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_line --regexp '^ +4096 +20 '
    assert_both_verified
}

@test "rdma_bench: write latency (ping-pong), verified" {
    bench --op write --mode lat --size 64 --iters 20 --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: read bandwidth, verified" {
    bench --op read --mode bw --size 4096 --iters 20 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_both_verified
}

@test "rdma_bench: read latency, verified" {
    bench --op read --mode lat --size 64 --iters 20 --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: send bandwidth, verified; the responder counts every message" {
    bench --op send --mode bw --size 4096 --iters 20 --warmup 2 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_success
    assert_peer_line "Responder served 22 messages"
    assert_peer_line --regexp '^Verified: '
}

@test "rdma_bench: send latency (ping-pong), verified" {
    bench --op send --mode lat --size 64 --iters 20 --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: write with immediate bandwidth, verified" {
    bench --op write_imm --mode bw --size 4096 --iters 20 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_both_verified
}

@test "rdma_bench: write with immediate latency (ping-pong), verified" {
    bench --op write_imm --mode lat --size 64 --iters 20 --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: atomic fetch-and-add bandwidth, verified: the counter went up once per add" {
    bench --op atomic --mode bw --iters 20 --warmup 5 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_line --regexp '^ +8 +20 '
    assert_both_verified
}

@test "rdma_bench: atomic fetch-and-add latency, verified" {
    bench --op atomic --mode lat --iters 20 --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: atomic compare-and-swap bandwidth and latency, verified: every swap succeeded" {
    bench --op atomic --atomic cas --mode bw --iters 20 --warmup 5 --tx-depth 8 --verify
    assert_bw_rows 1
    assert_line "Verified: the counter went up by one per compare-and-swap"
    assert_both_verified
    bench --op atomic --atomic cas --mode lat --iters 20 --verify
    assert_lat_rows 1
    assert_peer_line "Verified: the counter holds one per compare-and-swap"
    assert_both_verified
}

@test "rdma_bench: busy polling without yielding (--no-yield, perftest's way), verified" {
    bench --op send --mode lat --size 64 --iters 20 --no-yield --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: -q 2 and 4 (several QPs on one CQ): one row for all, each QP's data verified" {
    bench --op write --mode bw --size 4096 --iters 20 --tx-depth 8 -q 4 --verify
    assert_bw_rows 1
    assert_line --regexp '^ +4096 +80 ' # 4 QPs x 20 messages, as perftest counts -q
    assert_line --partial "and 4 QPs on it"
    assert_both_verified
    bench --op send --mode bw --size 4096 --iters 20 --warmup 2 --tx-depth 8 --qps 2 --verify
    assert_bw_rows 1
    assert_both_verified
    assert_peer_line "Responder served 44 messages"
    bench --op read --mode bw --size 4096 --iters 20 --tx-depth 8 -q 2 --verify
    assert_both_verified
    bench --op atomic --mode bw --iters 20 --tx-depth 8 -q 2 --verify
    assert_both_verified
}

@test "rdma_bench: -q 0, above the maximum, with --mode lat, or past the last port with -cm is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) -q 0
    assert_equal "$stderr" "rdma_bench_requester: --qps 0: expected 1 to 16 queue pairs
hint: give -q 1 to 16 (each QP has its own slice of memory, up to 8 MiB, on both sides)"
    run -2 --separate-stderr "$RESPONDER" $(responder_paths) --qps 17
    assert_regex "$stderr" "^rdma_bench_responder: --qps 17: expected 1 to 16 queue pairs"
    assert_regex "$stderr" "hint: give -q 1 to 16"
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --mode lat -q 2
    assert_equal "$stderr" "rdma_bench_requester: --qps 2: a latency test times one operation at a time, on one QP
hint: give --mode bw with -q, or leave -q out (perftest's ib_*_lat refuse -q too)"
    run -2 --separate-stderr "$RESPONDER" -cm -lp 65534 -q 4
    assert_equal "$stderr" "rdma_bench_responder: -lp 65534 with -q 4: QP 3 would listen on port 65537, beyond 65535
hint: give -lp 65532 or less on both sides"
}

@test "rdma_bench: --duration repeats rounds of --iters until the time is up (perftest -D)" {
    bench --op write --mode bw --size 4096 --iters 50 --duration 2
    assert_bw_rows 1
    assert_line --regexp '^ +4096 +[0-9]*(00|50) '
    assert_success
}

@test "rdma_bench: --duration 0, or with latency or SEND, is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --duration 0
    assert_equal "$stderr" "rdma_bench_requester: --duration 0: nothing would be measured
hint: give --duration 1 or more, or leave it out"
    run -2 --separate-stderr "$RESPONDER" $(responder_paths) --op send --duration 5
    assert_regex "$stderr" "^rdma_bench_responder: --duration: only for --mode bw of write, read or atomic"
    assert_regex "$stderr" "hint: give --iters N instead"
}

@test "rdma_bench: --output csv prints the result rows comma-separated, with a header" {
    bench --op write --mode bw --size 4096 --iters 20 --tx-depth 8 --output csv
    assert_success
    assert_line "bytes,iterations,MB/s,Gb/s,Mmsg/s,user_us/op,sys_us/op"
    assert_line --regexp '^4096,20(,[0-9.]+){5}$'
    bench --op read --mode lat --size 64 --iters 20 --output csv
    assert_line "bytes,iterations,min_us,median_us,p99_us,p99.9_us,max_us,user_us/op,sys_us/op"
    assert_line --regexp '^64,20(,[0-9.]+){7}$'
}

@test "rdma_bench: --output other than table or csv is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --output json
    assert_equal "$stderr" 'rdma_bench_requester: --output: expected table or csv, got "json"
hint: give --output table (aligned) or --output csv (comma-separated)'
}

@test "rdma_bench: --all measures every power of two from 2 B to 8 MiB" {
    bench --op write --mode bw --all --iters 2 --warmup 0 --tx-depth 4 --verify
    assert_bw_rows 23
    assert_line --regexp '^ +2 +2 '
    assert_line --regexp '^ +8388608 +2 '
    assert_both_verified
}

@test "rdma_bench: the knobs together: events, chains, selective signaling, batch polling, inline" {
    bench --op send --mode bw --size 128 --iters 40 --tx-depth 16 --cq-mod 8 --post-list 4 --poll-batch 4 \
        --inline-size 128 --events --verify
    assert_bw_rows 1
    assert_line --partial "event polling, batches of 4, chains of 4"
    assert_both_verified
}

@test "rdma_bench: --api extended (ibv_wr_*(), chapter 21): every operation in both measurements, verified" {
    local op
    for op in write read send write_imm "atomic --atomic fadd" "atomic --atomic cas"; do
        # shellcheck disable=SC2086 # (op holds its --atomic)
        bench --op $op --mode bw --iters 20 --warmup 5 --tx-depth 8 --api extended --verify
        assert_bw_rows 1
        assert_line --regexp "^step 5: measure .*, chains of 1, posted with ibv_wr_\*\(\)$"
        assert_both_verified
        # shellcheck disable=SC2086
        bench --op $op --mode lat --iters 20 --api extended --verify
        assert_lat_rows 1
        assert_line --regexp "^step 5: measure .*, posted with ibv_wr_\*\(\)$"
        assert_both_verified
    done
}

@test "rdma_bench: --api extended with chains, inline data and selective signaling, verified" {
    bench --op send --mode bw --size 128 --iters 40 --tx-depth 16 --cq-mod 8 --post-list 4 --inline-size 128 \
        --api extended --verify
    assert_bw_rows 1
    assert_line --partial "busy polling, batches of 16, chains of 4, posted with ibv_wr_*()"
    assert_both_verified
    bench --op write --mode lat --size 64 --iters 20 --inline-size 64 --api extended --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: --api other than classic or extended is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --api new
    assert_equal "$stderr" 'rdma_bench_requester: --api: expected classic or extended, got "new"
hint: give --api classic (ibv_post_send(), perftest --use_old_post_send) or --api extended (ibv_wr_*(), perftest'"'"'s default)'
}

@test "rdma_bench: latency with a completion channel, verified" {
    bench --op send --mode lat --size 16 --iters 20 --events --verify
    assert_lat_rows 1
    assert_both_verified
}

@test "rdma_bench: --tx-depth 0 is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --tx-depth 0
    assert_equal "$stderr" "rdma_bench_requester: --tx-depth 0: no work request could ever be posted
hint: give --tx-depth 1 or more: 1 for latency, 128 is perftest's default for bandwidth"
}

@test "rdma_bench: a size above the memory region is a usage error with a hint" {
    run -2 --separate-stderr "$RESPONDER" $(responder_paths) --size 9000000
    assert_regex "$stderr" "^rdma_bench_responder: --size 9000000: larger than the 8388608-byte memory region"
    assert_regex "$stderr" "hint: give --size 8388608 or less"
}

@test "rdma_bench: --atomic takes fadd or cas, and only with --op atomic: usage errors with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --op atomic --atomic swap
    assert_equal "$stderr" 'rdma_bench_requester: --atomic: expected fadd or cas, got "swap"
hint: give --atomic fadd (fetch-and-add) or --atomic cas (compare-and-swap)'
    run -2 --separate-stderr "$RESPONDER" $(responder_paths) --op read --atomic cas
    assert_equal "$stderr" "rdma_bench_responder: --atomic: only for --op atomic, not --op read
hint: add --op atomic, or leave --atomic out"
}

@test "rdma_bench: signaling every N-th send with N above max_send_wr is a usage error with a hint" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) --tx-depth 8 --cq-mod 16
    assert_regex "$stderr" "^rdma_bench_requester: --cq-mod 16: above the send queue depth \(--tx-depth 8\)"
    assert_regex "$stderr" "hint: signal at least one in every max_send_wr sends: give --cq-mod 8 or less"
}

@test "rdma_bench: an inline size above the device's limit is a usage error that names the limit" {
    run -2 --separate-stderr "$REQUESTER" $(requester_paths) -t 5 --inline-size 1000000
    assert_regex "$stderr" "rdma_bench_requester: --inline-size 1000000: above the device's limit of [0-9]+ bytes inline"
    assert_regex "$stderr" "hint: give --inline-size [0-9]+ or less"
}

@test "rdma_bench: a responder started with other knobs makes the requester time out, not hang" {
    run_pair "$RESPONDER" $(responder_paths) -t 4 --op send --mode lat --iters 5 -- \
        "$REQUESTER" $(requester_paths) -t 4 --op send --mode lat --iters 50
    assert_failure 1
    assert_line --index -1 "Sample finished with errors"
}
