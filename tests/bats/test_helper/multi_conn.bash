# tests/bats/test_helper/multi_conn.bash: what rdma_multi_conn.bats and rdma_srq.bats share (both
# receivers take rdma_multi_conn_send's messages). Loaded after common.bash; uses $RECEIVE, $SEND, $PORT.

# files_flow N [RECEIVER ARGS...] [-- SENDER ARGS...]: the descriptor flow with N connections, each side
# one process, each given its extra arguments.
files_flow() {
    local n=$1 T=$BATS_TEST_TMPDIR recv_args=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do recv_args+=("$1"); shift; done
    [ $# -eq 0 ] || shift
    run_pair "$RECEIVE" -nc "$n" -ld "$T/receiver.desc" -re "$T/sender.desc" -t 30 "${recv_args[@]}" -- \
        "$SEND" -nc "$n" -ld "$T/sender.desc" -re "$T/receiver.desc" -t 30 "$@"
}

# cm_receiving_server N [RECEIVER ARGS...]: a receiving server for N senders, N sender clients in the
# background, each with its own string. Afterwards $peer_status/$peer_output are the server's.
cm_receiving_server() {
    local n=$1 i
    shift
    require_cm_addr
    start_peer server "$RECEIVE" -cm -nc "$n" -lp "$PORT" -t 60 "$@"
    wait_listening server
    for ((i = 0; i < n; i++)); do
        start_peer "client$i" "$SEND" -cm -sa "$CM_ADDR" -lp "$PORT" -t 60 -s "from client $i"
    done
    for ((i = 0; i < n; i++)); do
        wait_peer "client$i"
        [ "$peer_status" = 0 ] || fail "client $i exited with status $peer_status: $peer_output"
    done
    wait_peer server
}

# rnr_naks: the RNR NAKs the device has sent so far (rxe counts them in send_rnr_err; on one device
# the sender's side counts the same NAKs as rcvd_rnr_err).
rnr_naks() { at_device sh -c 'cat /sys/class/infiniband/*/ports/1/hw_counters/send_rnr_err 2>/dev/null | head -1'; }
