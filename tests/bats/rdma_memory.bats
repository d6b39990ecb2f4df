#!/usr/bin/env bats
# rdma_memory's window pair: the responder grants part of a region through a memory window (type 1 or
# 2), the requester writes into it, the responder revokes it. The demonstrations: a WRITE past the
# window's end, a WRITE after the revocation, a window bound past its region, a type 1 window revoked
# with a SEND with invalidate; each refused by a device, the responder's memory unchanged.
# Run with run-bats --cm (the RDMA CM test needs the device on an interface with an address).

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_memory_window_requester)
    RESPONDER=$(prog rdma_memory_window_responder)
    PORT=$((20000 + RANDOM % 20000))
}

window_pair() { # window_pair RESPONDER_ARGS... -- REQUESTER_ARGS...
    local resp=()
    while [ "$1" != -- ]; do
        resp+=("$1")
        shift
    done
    shift
    run_pair "$RESPONDER" -ld "$BATS_TEST_TMPDIR/responder.desc" -re "$BATS_TEST_TMPDIR/requester.desc" "${resp[@]}" -- \
        "$REQUESTER" -ld "$BATS_TEST_TMPDIR/requester.desc" -re "$BATS_TEST_TMPDIR/responder.desc" "$@"
}

@test "rdma_memory window: type 2 is granted, written through, and revoked with LOCAL_INV" {
    window_pair -t 20 -- -t 20 -w "through a type 2 window"
    assert_success
    assert_line --regexp '^ +granted: addr 0x[0-9a-f]+, length 256, rkey 0x[0-9a-f]+, access remote_write$'
    assert_line 'Wrote "through a type 2 window" through the window'
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "step 6: wait for the requester's request, bind a type 2 window over bytes 1024 to 1280"
    assert_peer_line --regexp "the region's rkey 0x[0-9a-f]+ stays ours"
    assert_peer_line 'Window holds: "through a type 2 window"'
    assert_peer_line "Outside the window: all 3840 bytes unchanged"
    assert_peer_line --regexp "step 8: revoke the window: invalidate rkey 0x[0-9a-f]+ \(IBV_WR_LOCAL_INV\)"
    assert_peer_line "Since the revocation: all 4096 bytes unchanged"
    assert_peer_line --index -1 "Sample finished successfully"
    # The window's rkey is not the region's: the requester never sees the region's key.
    local granted region
    granted=$(sed -n 's/.*granted: addr 0x[0-9a-f]*, length 256, rkey \(0x[0-9a-f]*\),.*/\1/p' <<<"$output")
    region=$(sed -n "s/.*the region's rkey \(0x[0-9a-f]*\) stays ours.*/\1/p" <<<"$peer_output")
    assert [ -n "$granted" ] && [ -n "$region" ] && [ "$granted" != "$region" ]
}

@test "rdma_memory window: type 1 is bound with ibv_bind_mw and revoked by a bind of length 0" {
    window_pair -t 20 --type 1 --offset 0 --length 64 -- -t 20 -w "type 1"
    assert_success
    assert_line --regexp 'granted: addr 0x[0-9a-f]+, length 64, rkey'
    assert_equal "$peer_status" 0
    assert_peer_line --partial "bind a type 1 window over bytes 0 to 64"
    assert_peer_line 'Window holds: "type 1"'
    assert_peer_line "Outside the window: all 4032 bytes unchanged"
    assert_peer_line --partial "step 8: revoke the window: bind it again with length 0"
    assert_peer_line "Since the revocation: all 4096 bytes unchanged"
}

@test "rdma_memory window -cm: the requester revokes a type 2 window with a SEND with invalidate; refused on Soft-RoCE" {
    require_cm_addr
    if served; then
        # Linux 6.1's rxe panics on it (chapter 18): the requester refuses before it connects.
        run -1 "$REQUESTER" -cm -sa "$CM_ADDR" -lp "$PORT" -t 5 --invalidate
        assert_line --partial "requester: step 1 failed: --invalidate: rxe0 is Soft-RoCE, whose kernel driver (Linux 6.1) crashes the responder's machine"
        assert_line --partial "hint: leave out --invalidate (the responder then revokes the window itself), or use a NIC"
        refute_line --partial "step 2:"
        return
    fi
    cm_pair "$RESPONDER" -cm -lp "$PORT" -t 30 -- "$REQUESTER" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 --invalidate
    assert_success
    assert_line --regexp 'step 8: say "done" with a SEND with invalidate: it revokes rkey 0x[0-9a-f]+ as it arrives'
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "step 8: nothing to revoke: the requester's SEND with invalidate revoked rkey 0x[0-9a-f]+ as it arrived"
    assert_peer_line "Since the revocation: all 4096 bytes unchanged"
}

@test "rdma_memory window -cm: a type 1 window, written and revoked over RDMA CM" {
    require_cm_addr
    cm_pair "$RESPONDER" -cm -lp "$PORT" -t 30 --type 1 -- "$REQUESTER" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30
    assert_success
    assert_line --partial "step 11: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    assert_peer_line 'Window holds: "Hi RDMA!"'
    assert_peer_line --partial "step 8: revoke the window: bind it again with length 0"
    assert_peer_line "Since the revocation: all 4096 bytes unchanged"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_memory window: a WRITE one byte past the window: a NIC refuses it, Soft-RoCE lets it through" {
    RUN_FLAGS=-1 window_pair -t 10 -- -t 20 --past-window -w "0123456789"
    assert_line --regexp '\(demonstration\) writing bytes 0x[0-9a-f]+ to 0x[0-9a-f]+: the last one is past the window'
    assert_line --index -1 "Sample finished with errors"
    assert_equal "$peer_status" 1
    if served; then
        # rxe checks a window's rkey, access and region, not its range (check_rkey() in rxe_resp.c): the
        # WRITE lands, its last byte outside the window, and the responder's own check finds it.
        assert_line --partial "requester: step 7 failed: the RDMA WRITE past the window's end succeeded"
        assert_line --partial "hint: the responder's device did not hold the WRITE to the window's range: Soft-RoCE checks"
        assert_peer_line 'Window holds: "012345678" (from byte 247)'
        assert_peer_line --partial "responder: step 7 failed: 1 byte(s) outside the window changed"
    else
        assert_line --partial "requester: step 7 failed: the RDMA WRITE past the window's end completed with IBV_WC_REM_ACCESS_ERR"
        assert_peer_line 'Window holds: ""'
        assert_peer_line "Outside the window: all 3840 bytes unchanged"
    fi
}

@test "rdma_memory window: a WRITE past the region's end, through a window at its end, is refused" {
    RUN_FLAGS=-1 window_pair -t 10 --offset 3840 --length 256 -- -t 20 --past-window -w "0123456789"
    assert_line --partial "requester: step 7 failed: the RDMA WRITE past the window's end completed with IBV_WC_REM_ACCESS_ERR"
    assert_equal "$peer_status" 1
    assert_peer_line 'Window holds: ""'
    assert_peer_line "Outside the window: all 3840 bytes unchanged"
    assert_peer_line --partial "responder: step 7 failed: the requester's \"done\" completed with IBV_WC_WR_FLUSH_ERR"
}

@test "rdma_memory window: the revoked rkey no longer works, type 2 and type 1" {
    local type
    for type in 2 1; do
        RUN_FLAGS=-1 window_pair -t 10 --type "$type" -- -t 20 --after-revoke -w "granted"
        assert_line 'Wrote "granted" through the window'
        assert_line --regexp '\(demonstration\) the grant has ended: writing through rkey 0x[0-9a-f]+ again'
        assert_line --partial "requester: step 9 failed: the RDMA WRITE through the revoked window completed with IBV_WC_REM_ACCESS_ERR"
        assert_equal "$peer_status" 1
        assert_peer_line 'Window holds: "granted"'
        assert_peer_line "Since the revocation: all 4096 bytes unchanged"
        assert_peer_line --partial "responder: step 9 failed: the requester's goodbye completed with IBV_WC_WR_FLUSH_ERR"
    done
}

@test "rdma_memory window: a window bound past its region is refused by the device" {
    RUN_FLAGS=-1 window_pair -t 10 --offset 4000 --length 256 -- -t 5
    assert_equal "$peer_status" 1
    assert_peer_line --partial "responder: step 6 failed: the window's bind completed with IBV_WC_MW_BIND_ERR"
    assert_peer_line --partial "hint: a memory window bind failed"
    assert_line --partial "requester: step 5 failed"
}

@test "rdma_memory window: bad flags and a message longer than the window" {
    run -2 --separate-stderr "$RESPONDER" --type 3
    assert_equal "$stderr" 'rdma_memory_window_responder: --type: expected a number from 1 to 2, got "3"'
    run -2 --separate-stderr "$RESPONDER" -m x
    assert_equal "$stderr" 'rdma_memory_window_responder: unknown flag "-m" (see --help)'
    RUN_FLAGS=-1 window_pair -t 10 --length 8 -- -t 10 -w "longer than eight"
    assert_line --partial "requester: step 6 failed: the message is 17 bytes and the window 8; nothing was posted"
    assert_line --partial "hint: send at most 8 bytes (-w), or ask for a longer window"
    refute_line --partial "step 7:"
    run -1 "$REQUESTER" -w "" -ld "$BATS_TEST_TMPDIR/x" -re "$BATS_TEST_TMPDIR/y" -t 1
    assert_line --partial "requester: step 2 failed: nothing to write: the message is empty"
}
