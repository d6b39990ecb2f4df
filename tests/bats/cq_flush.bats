#!/usr/bin/env bats
# A CQ must hold every send request that can be outstanding, signaled or not: when a QP fails, each
# request still queued completes with IBV_WC_WR_FLUSH_ERR, the unsignaled ones too (IBTA vol. 1,
# 10.7.3.1). tests/device/cq_flush.cpp shows it on one device, and what a CQ sized by the signaled
# requests alone does: it overruns (IBV_EVENT_CQ_ERR). One TAP line per case.

load test_helper/common

setup() {
    require_device_test cq_flush
}

@test "every outstanding send, signaled or not, is flushed into a CQ sized by cq_entries(); a smaller one overruns" {
    run --separate-stderr timeout -k 5 120 "$DEVICE_TEST" -t 10
    assert_success
    assert_line --index 0 "1..2"
    assert_line --regexp '^ok 1 - CQ of cq_entries\(\) = 16 \+ 4 \(device gave [0-9]+\): 16 of 16 sends and 4 of 4 receives IBV_WC_WR_FLUSH_ERR, 0 other, device events: none$'
    assert_line --regexp '^ok 2 - CQ sized by the signaled sends alone, 1 \+ 4 (\(device gave [0-9]+\): overrun: .*IBV_EVENT_CQ_ERR|# SKIP )'
    refute_line --partial "not ok"
}
