#!/usr/bin/env bats
# -cm on the pairs: the responder listens (no -sa), the requester connects to -sa; the mmap descriptor
# travels in a SEND right after the connection, so no descriptor files are used. Run with run-bats --cm.

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    PORT=$((20000 + RANDOM % 20000))
}

# cm_pair SERVER [ARGS...] -- CLIENT [ARGS...]: the server in the background, the client under `run`
# once the server listens; $peer_status/$peer_output are the server's.
cm_pair() {
    local server=()
    while [ "$1" != -- ]; do
        server+=("$1")
        shift
    done
    shift
    start_peer server "${server[@]}"
    wait_listening server
    run timeout -k 5 120 "$@"
    wait_peer server
}

@test "rdma_write -cm: the string crosses over, no descriptor file is written, both sides disconnect" {
    cd "$BATS_TEST_TMPDIR"
    cm_pair "$(prog rdma_write_responder)" -cm -lp "$PORT" -t 30 -ld none.desc -m none.mmap -- \
        "$(prog rdma_write_requester)" -cm -sa "$CM_ADDR" -lp "$PORT" -t 30 -w "over RDMA CM" -ld none2.desc
    assert_success
    assert_line --partial "RDMA CM: $CM_ADDR port $PORT is reachable through"
    assert_line 'Requester has written: "over RDMA CM"'
    assert_line --partial "step 9: disconnect"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line --regexp "RDMA CM: connection established from $CM_ADDR port [0-9]+"
    assert_line 'Responder memory now holds: "over RDMA CM"'
    assert_line --index -1 "Sample finished successfully"
    [ ! -e none.desc ] && [ ! -e none.mmap ] && [ ! -e none2.desc ]
}
