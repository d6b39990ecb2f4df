#!/usr/bin/env bats
# The device checks every remote access against the memory region's bounds and its rkey: a requester
# that writes, reads or runs an atomic even one byte outside the exported range (or with a wrong rkey)
# is refused, and memory outside the region is never touched. tests/device/mr_bounds.cpp sends the
# hostile requests, one per fresh pair of QPs, and prints one TAP line per case.

load test_helper/common

setup() {
    require_device_test mr_bounds
}

@test "out-of-bounds and wrong-rkey requests are refused; memory outside the export never changes" {
    run --separate-stderr timeout -k 5 120 "$DEVICE_TEST" -t 5
    assert_success
    assert_line --index 0 "1..15"
    # Every hostile request is refused by the responder (a NAK: IBV_WC_REM_ACCESS_ERR, as IBTA says for
    # an rkey or bounds violation, and as rxe returns for each), and no byte of the 3 pages changes.
    local refused="IBV_WC_REM_ACCESS_ERR, memory outside unchanged, window unchanged"
    local expected=(
        "ok 1 - WRITE 1 byte at addr-1: $refused"
        "ok 2 - WRITE 1 byte at addr+256: $refused"
        "ok 3 - WRITE 257 bytes at addr: $refused"
        "ok 4 - WRITE 16 bytes at addr+250 (straddling the end): $refused"
        "ok 5 - WRITE 8 bytes at addr-$(getconf PAGESIZE): $refused"
        "ok 6 - READ 8 bytes at addr+256: $refused, nothing read back"
        "ok 7 - READ 8 bytes at addr-8: $refused, nothing read back"
        "ok 8 - FETCH_AND_ADD at addr-8: $refused, nothing read back"
        "ok 9 - FETCH_AND_ADD at addr+256: $refused, nothing read back"
        "ok 10 - CMP_AND_SWP at addr-8: $refused, nothing read back"
        "ok 11 - CMP_AND_SWP at addr+256: $refused, nothing read back"
        "ok 12 - WRITE 8 bytes at 0xfffffffffffffffc (the range wraps past 2^64): $refused"
        "ok 13 - WRITE 8 bytes at addr with a wrong rkey (rkey ^ 0x1000): $refused"
        "ok 14 - WRITE 256 bytes at addr (the whole window, control): IBV_WC_SUCCESS, exactly the 256 window bytes changed"
        "ok 15 - after all cases: every byte of the 3 pages outside the window holds the canary 0xa5"
    )
    local line
    for line in "${expected[@]}"; do
        assert_line "$line"
    done
    refute_line --partial "not ok"
}

@test "a bad flag is one line and exit status 2" {
    run -2 --separate-stderr "$DEVICE_TEST" -x
    assert_equal "$stderr" 'mr_bounds: unknown argument "-x" (takes -d NAME, -g INDEX, -t SECONDS)'
}
