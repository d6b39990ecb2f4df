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
    # (--vgdb=no: no gdbserver, whose shared-memory file in TMPDIR a 9p share cannot map;
    # --read-inline-info=no: a report names the function an inlined call landed in, not the inlined
    # one, and every start under memcheck costs about 1 s less emulated CPU of its 8 (tests/vm/cost);
    # rerun a failing pair without it to see the inlined frames; --vex-guest-chase=no: a translation
    # stops at a branch instead of following it, so less code is translated twice, first by memcheck
    # and then by the emulator: the rdma_write pair under memcheck 19.4 -> 18.1 s of emulated CPU,
    # step 1 7.2 -> 6.5 s (medians of 5, alternating; tests/results.md); what memcheck checks and
    # reports is the same)
    vg=("$(device_path "$(command -v valgrind)")" --tool=memcheck --vgdb=no --read-inline-info=no --vex-guest-chase=no --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible
        --errors-for-leak-kinds=definite,indirect,possible --suppressions="$RDMA_SAMPLES_SOURCE/tests/valgrind.supp"
        --log-file="$BATS_TEST_TMPDIR/$1.vg")
}

# clean_pair SAMPLE: run the pair with descriptor files, each side under memcheck (-t 60: memcheck is
# slow); both must succeed with an empty error summary.
clean_pair() {
    local resp req exports resp_args req_args cm_clients cm_req_args cm_only files_only m=() vg vg_resp
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
    assert_clean
}

# assert_clean: both sides' memcheck reports are free of errors, and both sides succeeded.
assert_clean() {
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
@test "valgrind: rdma_srq (a shared receive queue), both sides clean" { clean_pair srq; }
@test "valgrind: rdma_ud, both sides clean" { clean_pair ud; }
@test "valgrind: rdma_bench, both sides clean" { clean_pair bench; }
@test "valgrind: rdma_recovery (a WRITE refused, both QPs reset), both sides clean" { clean_pair recovery; }
@test "valgrind: rdma_memory (a memory window granted, written through, revoked), both sides clean" { clean_pair memory_window; }
@test "valgrind: rdma_memory (rdma_memory_register and rdma_memory_fork, no peer), clean" {
    local vg
    memcheck register
    run "${vg[@]}" "$BUILD/rdma_memory/rdma_memory_register" --sizes 4K,1M --runs 2
    assert_success
    assert_line --index -1 "Sample finished successfully"
    # The child of rdma_memory_fork runs under memcheck too and writes its own summary to the same log.
    # It _exit()s holding the whole heap it inherited (the parent's device context, its MR, libnl's
    # tables), abandoned by design: whether memcheck finds a pointer to each block in the child depends
    # on where the compiler left it (the MR was "definitely lost" in the child once run()'s code moved).
    # So leaks are no errors for this run (memory errors still are, in both processes), and the parent's
    # own leak summary, the first process's in the log, must be clean.
    memcheck fork
    vg=("${vg[@]/--errors-for-leak-kinds=definite,indirect,possible/--errors-for-leak-kinds=none}")
    run "${vg[@]}" "$BUILD/rdma_memory/rdma_memory_fork" -t 60
    assert_success
    assert_line --partial "Child read from the registered page"
    local parent kind
    parent=$(sed -n 's/^==\([0-9]*\)== Command: .*/\1/p' "$BATS_TEST_TMPDIR/fork.vg" | head -n 1)
    assert [ -n "$parent" ]
    for kind in "definitely lost" "indirectly lost" "possibly lost"; do
        assert_equal "$(grep -c "^==$parent==  *$kind: 0 bytes in 0 blocks" "$BATS_TEST_TMPDIR/fork.vg")" 1
    done
    local who
    for who in register fork; do
        echo "---- memcheck of rdma_memory_$who ----"
        cat "$BATS_TEST_TMPDIR/$who.vg"
        grep -q 'ERROR SUMMARY: 0 errors' "$BATS_TEST_TMPDIR/$who.vg"
        assert_equal "$(grep -c 'ERROR SUMMARY: [1-9]' "$BATS_TEST_TMPDIR/$who.vg")" 0
    done
}

# rdma_file_transfer connects with RDMA CM only (run-bats --cm): the receiver, a ring of 2 slots of 4 KiB,
# the sender, a 12 KiB file, so that the credit loop goes round.
@test "valgrind: rdma_file_transfer (RDMA CM), both sides clean" {
    local resp req exports resp_args req_args cm_clients cm_req_args cm_only files_only vg vg_resp port=$((20000 + RANDOM % 20000))
    require_cm_addr
    pair file_transfer
    memcheck responder
    vg_resp=("${vg[@]}")
    memcheck requester
    head -c 12345 /dev/urandom >"$BATS_TEST_TMPDIR/file"
    PEER_TIMEOUT=300 cm_pair "${vg_resp[@]}" "$BUILD/$resp" -lp "$port" -t 60 "${resp_args[@]}" \
        -o "$BATS_TEST_TMPDIR/copy" -- "${vg[@]}" "$BUILD/$req" -sa "$CM_ADDR" -lp "$port" -t 60 "$BATS_TEST_TMPDIR/file"
    assert_clean
    cmp "$BATS_TEST_TMPDIR/file" "$BATS_TEST_TMPDIR/copy"
}

# rdma_recovery's RDMA CM pair: the server for one client, the client's three messages.
@test "valgrind: rdma_recovery with RDMA CM (its server and client), both sides clean" {
    local vg vg_resp port=$((20000 + RANDOM % 20000))
    require_cm_addr
    memcheck responder
    vg_resp=("${vg[@]}")
    memcheck requester
    PEER_TIMEOUT=300 cm_pair "${vg_resp[@]}" "$BUILD/rdma_recovery/rdma_recovery_server" -lp "$port" -t 60 -- \
        "${vg[@]}" "$BUILD/rdma_recovery/rdma_recovery_client" -sa "$CM_ADDR" -lp "$port" -t 60 --count 3
    assert_clean
}

# rdma_event_loop: the server for one client, the client's three echoes.
@test "valgrind: rdma_event_loop (its server and client), both sides clean" {
    local vg vg_resp port=$((20000 + RANDOM % 20000))
    require_cm_addr
    memcheck responder
    vg_resp=("${vg[@]}")
    memcheck requester
    PEER_TIMEOUT=300 cm_pair "${vg_resp[@]}" "$BUILD/rdma_event_loop/rdma_event_loop_server" -lp "$port" -t 60 \
        --clients 1 -- "${vg[@]}" "$BUILD/rdma_event_loop/rdma_event_loop_client" -sa "$CM_ADDR" -lp "$port" -t 60 --count 3
    assert_clean
}

# rdma_multicast: a receiver, then (once it has attached) the sender, whose own QP is attached too
# (--loopback: its receive path runs as well).
@test "valgrind: rdma_multicast (a receiver and a sender of one group), both sides clean" {
    local vg vg_resp group=239.2.$((RANDOM % 250)).$((1 + RANDOM % 250))
    require_cm_addr
    memcheck responder
    vg_resp=("${vg[@]}")
    memcheck requester
    PEER_TIMEOUT=300 start_peer responder "${vg_resp[@]}" "$BUILD/rdma_multicast/rdma_multicast_receive" --group "$group" -t 60
    wait_line responder "attached to $group"
    run timeout -k 5 300 "${vg[@]}" "$BUILD/rdma_multicast/rdma_multicast_send" --group "$group" -t 60 --loopback
    wait_peer responder
    assert_clean
    assert_peer_line "Received 3 of 3 datagrams"
}
