#!/usr/bin/env bats
# Bad input and faults: every one ends in a clear error within -t, never a hang or a crash.

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_write_requester)
    RESPONDER=$(prog rdma_write_responder)
}

@test "a requester given a wrong rkey fails with REM_ACCESS_ERR and a hint; the responder's memory is unchanged" {
    # Stand between the two: take the responder's mmap descriptor, spoil its rkey, hand it on.
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" -ld "$T/responder.desc" -re "$T/requester.desc" -m "$T/real.mmap" -t 15
    spoil_in_flight "$T/real.mmap" "$T/resource.desc" 's/^rkey=.*/rkey=0x00badbad/'
    run -1 --separate-stderr timeout 60 "$REQUESTER" -ld "$T/requester.desc" -re "$T/responder.desc" -m "$T/resource.desc" -t 15
    wait_peer responder
    assert_line --partial "rkey 0xbadbad"
    assert_regex "$stderr" "requester: step 7 failed: the RDMA WRITE completed with IBV_WC_REM_ACCESS_ERR"
    assert_regex "$stderr" "hint: the peer refused access: check the rkey"
    assert_line --index -1 "Sample finished with errors"
    # The responder never saw the string: its buffer is still empty, and it says why it stopped.
    assert_equal "$peer_status" 1
    refute_peer_output --partial "Hi RDMA!"
    assert_peer_line --index -1 "Sample finished with errors"
}

@test "a registration over the locked-memory limit fails with ENOMEM, and the hint names the limit" {
    # 1 MiB to register, 64 KiB allowed: ib_umem_get() counts the pages against RLIMIT_MEMLOCK.
    run -1 --separate-stderr under_memlock 64 rdma_bench_responder $(responder_paths) -t 2 \
        --op write --size 1048576
    assert_regex "$stderr" "responder: step 2 failed: ibv_reg_mr: Cannot allocate memory \(errno 12\)"
    assert_regex "$stderr" "hint: this region would take the pages this process has pinned past its locked-memory limit .*RLIMIT_MEMLOCK here: 64 KiB \(hard limit 64 KiB\)"
}

@test "a registration with a locked-memory limit of 0 fails with EPERM, and the hint says why" {
    # A limit of 0 is refused before any page is counted (can_do_mlock()), with another errno.
    run -1 --separate-stderr under_memlock 0 rdma_write_responder $(responder_paths) -t 2
    assert_regex "$stderr" "responder: step 2 failed: ibv_reg_mr: Operation not permitted \(errno 1\)"
    assert_regex "$stderr" "hint: this process may lock no memory at all .*RLIMIT_MEMLOCK here: 0 KiB"
}

@test "a requester whose responder never starts times out within -t, naming the file it waited for" {
    local start=$SECONDS
    run -1 --separate-stderr "$REQUESTER" $(requester_paths) -t 2
    assert [ $((SECONDS - start)) -le 6 ]
    assert_line --partial "waiting up to 2 s for $BATS_TEST_TMPDIR/responder.desc (written by the responder (rdma_write_responder))"
    assert_regex "$stderr" "requester: step 4 failed: timed out after 2 s waiting for $BATS_TEST_TMPDIR/responder.desc"
    assert_regex "$stderr" "hint: start the responder"
}

@test "a responder whose requester never starts times out within -t" {
    local start=$SECONDS
    run -1 --separate-stderr "$RESPONDER" $(responder_paths) -t 2
    assert [ $((SECONDS - start)) -le 6 ]
    assert_regex "$stderr" "responder: step 5 failed: timed out after 2 s waiting for $BATS_TEST_TMPDIR/requester.desc"
}

@test "a requester that dies after connecting leaves the responder with a timeout, not a hang" {
    local T=$BATS_TEST_TMPDIR
    start_peer responder "$RESPONDER" $(responder_paths) -t 3
    # A fake requester: a descriptor for a QP that does not exist, then nothing.
    printf '%s\n' "# rdma-samples connection descriptor" version=1 kind=connection nonce=0x0000000000000001 \
        qp_num=0x000abc psn=0x000001 lid=0x0000 gid=::ffff:127.0.0.1 mtu=1024 >"$T/requester.desc"
    wait_peer responder
    assert_equal "$peer_status" 1
    assert_regex "$peer_output" "responder: step 7 failed: timed out after 3 s waiting for the requester's goodbye"
}

@test "a malformed descriptor is rejected with its file name and line" {
    local T=$BATS_TEST_TMPDIR
    printf '%s\n' "# rdma-samples connection descriptor" version=1 kind=connection nonce=0x01 qp_num=0xnothex \
        psn=0x000001 lid=0x0000 gid=::1 mtu=1024 >"$T/requester.desc"
    run -1 --separate-stderr "$RESPONDER" $(responder_paths) -t 5
    assert_regex "$stderr" "responder: step 5 failed: $T/requester.desc line 5: qp_num: expected a hex number 0x\.\.\. up to 0xffffff, got \"0xnothex\""
    assert_regex "$stderr" "hint: the descriptor file is not one this program wrote"
}

@test "a truncated descriptor is rejected, naming the missing key" {
    local T=$BATS_TEST_TMPDIR
    printf '%s\n' "# rdma-samples connection descriptor" version=1 kind=connection nonce=0x01 qp_num=0x000011 >"$T/requester.desc"
    run -1 --separate-stderr "$RESPONDER" $(responder_paths) -t 5
    assert_regex "$stderr" "$T/requester.desc line 5: missing key \"psn\" \(is the file truncated\?\)"
}

@test "a stale answer from an earlier run is ignored, and the live responder is used" {
    local T=$BATS_TEST_TMPDIR
    printf '%s\n' "# rdma-samples connection descriptor" version=1 kind=connection nonce=0x0000000000000001 \
        peer_nonce=0x0000000000000002 qp_num=0x000abc psn=0x000001 lid=0x0000 gid=::ffff:127.0.0.1 mtu=1024 >"$T/responder.desc"
    run_pair "$RESPONDER" $(responder_paths) -t 20 -- "$REQUESTER" $(requester_paths) -t 20
    assert_success
    assert_line --partial "ignoring $T/responder.desc: it answers another run"
    assert_equal "$peer_status" 0
}

@test "a descriptor folder that does not exist is an explained error" {
    run -1 --separate-stderr "$REQUESTER" -ld /nonexistent/dir/req.desc -re "$BATS_TEST_TMPDIR/x" -t 2
    assert_regex "$stderr" "requester: step 4 failed: open\(\"/nonexistent/dir/req.desc.tmp.[0-9]+\"\): No such file or directory"
    assert_regex "$stderr" "hint: the folder does not exist"
}

@test "a descriptor path that is a FIFO, a directory, a device or a huge file: one line naming it, at once" {
    local T=$BATS_TEST_TMPDIR start
    mkfifo "$T/fifo.desc"
    mkdir "$T/dir.desc"
    head -c 100000 /dev/zero | tr '\0' 'A' >"$T/huge.desc"
    ln -s "$T/fifo.desc" "$T/link.desc"
    for remote in "$T/fifo.desc:is a FIFO, not a regular file" "$T/dir.desc:is a directory" \
        "/dev/zero:is a device or special file" "$T/huge.desc:is too large (100000 bytes" \
        "$T/link.desc:is a FIFO, not a regular file"; do
        start=$SECONDS
        run -1 --separate-stderr timeout 20 "$RESPONDER" -ld "$T/r.desc" -re "${remote%%:*}" -m "$T/m.desc" -t 10
        assert [ $((SECONDS - start)) -le 3 ]
        assert_regex "$stderr" "responder: step 5 failed: $(regex_quote "${remote%%:*}: ${remote#*:}")"
        assert_regex "$stderr" "hint: the descriptor file is not one this program wrote: check the path"
        assert_equal "$(printf '%s\n' "$stderr" | wc -l)" 2
    done
}

@test "a descriptor value full of control bytes is quoted escaped and cut, never printed raw" {
    local T=$BATS_TEST_TMPDIR
    { printf '# rdma-samples connection descriptor\nversion=1\nkind=connection\nnonce=0x1\n'
      printf 'qp_num=0x1\r\033[2J'; head -c 2000 /dev/zero | tr '\0' 'B'; printf '\npsn=0x1\nlid=0x0\ngid=::1\nmtu=1024\n'; } >"$T/evil.desc"
    run -1 --separate-stderr timeout 20 "$RESPONDER" -ld "$T/r.desc" -re "$T/evil.desc" -m "$T/m.desc" -t 5
    assert_regex "$stderr" 'line 5: qp_num: expected a hex number 0x\.\.\. up to 0xffffff, got "0x1\\r\\x1b\[2JBBB.*\.\.\." \(2008 bytes\)'
    assert [ "${#stderr}" -lt 600 ]
    refute_regex "$stderr" $'\r'
    refute_regex "$stderr" $'\033'
}
