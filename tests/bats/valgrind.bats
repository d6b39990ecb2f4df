#!/usr/bin/env bats
# Every pair under Valgrind's memcheck, both sides, on one device: no invalid read or write, no use of
# uninitialised memory, no leak (definite, indirect or possible). The plain build only (memcheck and
# AddressSanitizer do not mix). tests/valgrind.supp holds the only suppression, libibverbs' own device
# cache, with its reason.

load test_helper/common

setup() {
    require_rdma_device
    command -v valgrind >/dev/null || fail "valgrind is missing: ./lab deps installs it"
    # shellcheck source=tests/pairs.bash
    . "$RDMA_SAMPLES_SOURCE/tests/pairs.bash"
}

# memcheck NAME: the valgrind command line (in array `vg`) that runs a program under memcheck, its
# report in $BATS_TEST_TMPDIR/NAME.vg.
memcheck() {
    vg=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible
        --errors-for-leak-kinds=definite,indirect,possible --suppressions="$RDMA_SAMPLES_SOURCE/tests/valgrind.supp"
        --log-file="$BATS_TEST_TMPDIR/$1.vg")
}

# clean_pair SAMPLE: run the pair with descriptor files, each side under memcheck (-t 60: memcheck is
# slow); both must succeed with an empty error summary.
clean_pair() {
    local resp req exports resp_args req_args cm_clients cm_req_args m=() vg vg_resp
    pair "$1"
    [ "$exports" = 0 ] || m=(-m "$BATS_TEST_TMPDIR/resource.desc")
    if [ "$1" = bench ]; then resp_args+=(--size 4096 --iters 20 --verify) req_args+=(--size 4096 --iters 20 --verify); fi
    memcheck responder
    vg_resp=("${vg[@]}")
    memcheck requester
    PEER_TIMEOUT=300 run_pair "${vg_resp[@]}" "$BUILD/$resp" -ld "$BATS_TEST_TMPDIR/responder.desc" \
        -re "$BATS_TEST_TMPDIR/requester.desc" "${m[@]}" -t 60 "${resp_args[@]}" -- \
        "${vg[@]}" "$BUILD/$req" -ld "$BATS_TEST_TMPDIR/requester.desc" \
        -re "$BATS_TEST_TMPDIR/responder.desc" "${m[@]}" -t 60 "${req_args[@]}"
    local who
    for who in requester responder; do
        echo "---- memcheck of the $who ----"
        cat "$BATS_TEST_TMPDIR/$who.vg"
        grep -q 'ERROR SUMMARY: 0 errors' "$BATS_TEST_TMPDIR/$who.vg"
    done
    assert_success
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
}

@test "valgrind: rdma_write, both sides clean" { clean_pair write; }
@test "valgrind: rdma_read, both sides clean" { clean_pair read; }
@test "valgrind: rdma_write_immediate, both sides clean" { clean_pair write_immediate; }
@test "valgrind: rdma_send_receive, both sides clean" { clean_pair send_receive; }
@test "valgrind: rdma_send_receive_immediate, both sides clean" { clean_pair send_receive_immediate; }
@test "valgrind: rdma_atomic, both sides clean" { clean_pair atomic; }
@test "valgrind: rdma_sync_event, both sides clean" { clean_pair sync_event; }
@test "valgrind: rdma_multi_conn, both sides clean" { clean_pair multi_conn; }
@test "valgrind: rdma_ud, both sides clean" { clean_pair ud; }
@test "valgrind: rdma_bench, both sides clean" { clean_pair bench; }
