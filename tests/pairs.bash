# tests/pairs.bash: every sample pair, by the name ./lab and the tools use: the one pair table. Sourced
# by lab, tests/stress/stress, rdma_bench/support/bench and valgrind.bats; the tools in Python (trace/host.py)
# run it: `tests/pairs.bash SAMPLE` prints the pair as one JSON object (the names below), exit status 1
# for an unknown SAMPLE.
#
# pair SAMPLE sets:
#   resp, req            the two programs, relative to the build directory (responder: the side that
#                        waits, writes its descriptor first or listens under -cm)
#   exports              1 when the responder exports memory (takes -m)
#   resp_args, req_args  what each side is given besides the connection flags
#   cm_clients           how many requester processes an RDMA CM server with these args takes
#   cm_req_args          what each of those is given (an RDMA CM client makes one connection)
#   cm_only              1 for a pair that connects with RDMA CM only (file_transfer, event_loop): it is not in
#                        pair_samples, which the tools run with descriptor files too
#   files_only           1 for a pair that connects with descriptor files only (recovery: its RDMA CM flow
#                        is a pair of its own, recovery_cm): not in pair_samples either, which the tools
#                        run with RDMA CM too
#   group                1 for a pair that meets in a multicast group (multicast): no descriptor files, no
#                        -lp; each side joins the group its args name, and a receiver must have attached
#                        ("attached to") before the sender sends. Not in pair_samples either
# extended (chapter 21: the six RC operations of chapters 2 to 7 through the extended API) has its own
# suite (rdma_extended.bats), its provider-matrix cells and its two-host wire check, and is not in
# pair_samples either: its verbs reach the wire as those pairs' do.
# memory_window (chapter 18) has its own suites (rdma_memory.bats, valgrind, two_host) and is not in
# pair_samples: the stress and wire checks of the eleven pairs cover the verbs it shares with them.
pair_samples=(write read write_immediate send_receive send_receive_immediate atomic sync_event multi_conn srq ud bench)

pair() {
    exports=1 resp_args=() req_args=() cm_clients=1 cm_req_args=() cm_only=0 files_only=0 group=0
    case "$1" in
    write) resp=rdma_write/rdma_write_responder req=rdma_write/rdma_write_requester
        req_args=(-w "Hello from the requester!") ;;
    read) resp=rdma_read/rdma_read_responder req=rdma_read/rdma_read_requester ;;
    write_immediate) resp=rdma_write_immediate/rdma_write_immediate_responder
        req=rdma_write_immediate/rdma_write_immediate_requester ;;
    send_receive) resp=rdma_send_receive/rdma_receive req=rdma_send_receive/rdma_send exports=0
        req_args=(-s "Hello from the sender!") ;;
    send_receive_immediate) resp=rdma_send_receive_immediate/rdma_receive_immediate
        req=rdma_send_receive_immediate/rdma_send_immediate exports=0 req_args=(-s "Hello with an immediate!") ;;
    atomic) resp=rdma_atomic/rdma_atomic_responder req=rdma_atomic/rdma_atomic_requester
        resp_args=(--initial 40) req_args=(--add 2 --swap 7) ;;
    sync_event) resp=rdma_sync_event/rdma_sync_event_responder req=rdma_sync_event/rdma_sync_event_requester ;;
    multi_conn) resp=rdma_multi_conn/rdma_multi_conn_receive req=rdma_multi_conn/rdma_multi_conn_send exports=0
        resp_args=(-nc 2) req_args=(-nc 2 -s "one message per connection") cm_clients=2
        cm_req_args=(-s "one message per connection") ;;
    srq) pair multi_conn # (rdma_multi_conn's sender: an SRQ is the receiver's business alone)
        resp=rdma_srq/rdma_srq_receive ;;
    ud) resp=rdma_ud/rdma_ud_receive req=rdma_ud/rdma_ud_send exports=0 req_args=(-s "a numbered datagram") ;;
    bench) resp=rdma_bench/rdma_bench_responder req=rdma_bench/rdma_bench_requester ;;
    file_transfer) resp=rdma_file_transfer/rdma_file_receiver req=rdma_file_transfer/rdma_file_sender exports=0
        cm_only=1 resp_args=(-o /tmp/rdma_file_transfer.copy --force --chunk 4096 --slots 2) req_args=(/etc/services) ;;
    event_loop) resp=rdma_event_loop/rdma_event_loop_server req=rdma_event_loop/rdma_event_loop_client exports=0
        cm_only=1 resp_args=(--clients 2) cm_clients=2 req_args=(--count 3 -s "an echoed message")
        cm_req_args=("${req_args[@]}") ;;
    recovery) resp=rdma_recovery/rdma_recovery_responder req=rdma_recovery/rdma_recovery_requester files_only=1
        req_args=(--count 6 --fail-at 4) ;;
    memory_window) resp=rdma_memory/rdma_memory_window_responder req=rdma_memory/rdma_memory_window_requester exports=0
        req_args=(-w "through a window") ;;
    recovery_cm) resp=rdma_recovery/rdma_recovery_server req=rdma_recovery/rdma_recovery_client exports=0 cm_only=1
        req_args=(--count 6 --interval-ms 300) ;;
    multicast) resp=rdma_multicast/rdma_multicast_receive req=rdma_multicast/rdma_multicast_send exports=0 cm_only=1
        group=1 resp_args=(--group 239.1.2.3) req_args=(--group 239.1.2.3 -s "to the group") ;;
    extended) resp=rdma_extended/rdma_extended_responder req=rdma_extended/rdma_extended_requester
        req_args=(-w "through ibv_wr_*()") ;;
    *) return 1 ;;
    esac
    [ "$cm_clients" -gt 1 ] || cm_req_args=("${req_args[@]}")
}

# json_strings ARGS...: the arguments as a JSON array of strings.
json_strings() {
    local a sep=
    printf '['
    for a in "$@"; do
        a=${a//\\/\\\\}
        printf '%s"%s"' "$sep" "${a//\"/\\\"}"
        sep=', '
    done
    printf ']'
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    pair "${1:?usage: tests/pairs.bash SAMPLE}" || exit 1
    printf '{"resp": "%s", "req": "%s", "exports": %s, "cm_clients": %s, "cm_only": %s, "files_only": %s, "group": %s, ' \
        "$resp" "$req" "$exports" "$cm_clients" "$cm_only" "$files_only" "$group"
    printf '"resp_args": %s, "req_args": %s, "cm_req_args": %s}\n' "$(json_strings "${resp_args[@]}")" \
        "$(json_strings "${req_args[@]}")" "$(json_strings "${cm_req_args[@]}")"
fi
