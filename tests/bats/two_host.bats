#!/usr/bin/env bats
# Every pair across two machines: two Soft-RoCE VMs on a virtual network, descriptors crossing through a
# shared folder (the copy you would make with scp).

load test_helper/common
load test_helper/two_host

setup() {
    setup_two_hosts
}

# four_senders_on_host_b PREFIX: four rdma_multi_conn_send RDMA CM clients at once on host B, to the
# server at 10.77.0.1, client i sending "PREFIX i"; fails if any of them does.
four_senders_on_host_b() {
    on_host_b bash -c '
        pids=()
        for i in 0 1 2 3; do "$1" -cm -sa 10.77.0.1 -t 60 -s "$2 $i" & pids+=($!); done
        status=0
        for p in "${pids[@]}"; do wait "$p" || status=1; done
        exit $status' _ "$(prog rdma_multi_conn_send)" "$1"
}

@test "two hosts: rdma_multi_conn, an RDMA CM server on host A takes 4 clients from host B" {
    on_host_a "$(prog rdma_multi_conn_receive)" -cm -nc 4 -t 60
    four_senders_on_host_b "from host B, client"
    assert_success
    assert_equal "$peer_status" 0
    local i
    for i in 0 1 2 3; do
        assert_peer_line --regexp "^Got from sender: \"from host B, client $i\", connection [0-3]$"
    done
    assert_equal "$(grep -c 'established from 10.77.0.2' <<<"$peer_output")" 4
}

@test "two hosts: rdma_multi_conn with descriptor files, N = 1, 4 and 16, receiver on host A" {
    # One process per side and per N; the numbered files of each run cross through the shared folder.
    on_host_a bash -ec 'for n in 1 4 16; do "$1" -nc $n -ld "$2/recv$n.desc" -re "$2/send$n.desc" -t 60; done' \
        _ "$(prog rdma_multi_conn_receive)" "$SHARE"
    on_host_b bash -ec 'for n in 1 4 16; do "$1" -nc $n -ld "$2/send$n.desc" -re "$2/recv$n.desc" -t 60 -s "N=$n"; done' \
        _ "$(prog rdma_multi_conn_send)" "$SHARE"
    assert_success
    assert_equal "$peer_status" 0
    local n
    for n in 1 4 16; do
        assert_equal "$(grep -c "^Sender has sent: \"N=$n\", connection" <<<"$output")" "$n"
        assert_equal "$(grep -c "^Got from sender: \"N=$n\", connection" <<<"$peer_output")" "$n"
    done
    assert_peer_line 'Got from sender: "N=16", connection 15'
    assert_peer_line --partial "$SHARE/send16.desc-0015" # the numbered files crossed...
    assert_equal "$(ls -A "$SHARE")" ""                  # ...and each was consumed by its reader
}

@test "two hosts: rdma_multi_conn with RDMA CM, a server on host A for 1 and then 16 client processes on host B" {
    on_host_a bash -ec '"$1" -cm -nc 1 -lp 13591 -t 60; "$1" -cm -nc 16 -lp 13592 -t 60' _ "$(prog rdma_multi_conn_receive)"
    on_host_b bash -c '
        "$1" -cm -sa 10.77.0.1 -lp 13591 -t 60 -s "the only client" || exit 1
        pids=()
        for i in $(seq 0 15); do "$1" -cm -sa 10.77.0.1 -lp 13592 -t 60 -s "client $i of 16" & pids+=($!); done
        status=0
        for p in "${pids[@]}"; do wait "$p" || status=1; done
        exit $status' _ "$(prog rdma_multi_conn_send)"
    assert_success
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Sample finished successfully$' <<<"$output")" 17
    assert_peer_line 'Got from sender: "the only client", connection 0'
    local i
    for i in $(seq 0 15); do
        assert_peer_line --regexp "^Got from sender: \"client $i of 16\", connection ([0-9]|1[0-5])$"
    done
    assert_equal "$(grep -c 'established from 10.77.0.2' <<<"$peer_output")" 17
}

# rdma_bench across the two hosts: each operation in both measurements, small counts, --verify. Host A
# runs the ten responders in turn, host B the ten requesters; each pair has its own descriptor files
# (or its own RDMA CM port), so a file from the previous pair is never mistaken for the live one.
bench_loop() { # SIDE FLOW: the shell loop one host runs
    echo 'i=0; for op in write read send write_imm atomic; do for mode in bw lat; do i=$((i + 1));
        '"$(prog "rdma_bench_$1")"' "$@" --op $op --mode $mode --iters 5 --warmup 1 $([ $op = atomic ] || echo --size 64) --tx-depth 4 --verify \
            $(if [ "$FLOW" = cm ]; then echo -cm -lp $((PORT0 + i)) $SA; else echo -ld "$SHARE/$op-$mode-$ME.desc" \
              -re "$SHARE/$op-$mode-$PEER.desc" -m "$SHARE/$op-$mode-mmap.desc"; fi) -t 60 || exit 1
        echo "pair $op $mode done"; done; done'
}

@test "two hosts: rdma_bench, every operation in both measurements, descriptor files, --verify" {
    on_host_a env FLOW=files SHARE="$SHARE" ME=responder PEER=requester bash -c "$(bench_loop responder)" _
    on_host_b env FLOW=files SHARE="$SHARE" ME=requester PEER=responder bash -c "$(bench_loop requester)" _
    assert_success
    assert_line "pair atomic lat done"
    assert_equal "$(grep -c '^Verified: ' <<<"$output")" 10
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Verified: ' <<<"$peer_output")" 10
}

@test "two hosts: rdma_bench, every operation in both measurements, RDMA CM, --verify" {
    on_host_a env FLOW=cm PORT0=$((PORT % 1000 + 30000)) SA= bash -c "$(bench_loop responder)" _
    on_host_b env FLOW=cm PORT0=$((PORT % 1000 + 30000)) SA="-sa 10.77.0.1" bash -c "$(bench_loop requester)" _
    assert_success
    assert_line "pair atomic lat done"
    assert_equal "$(grep -c '^Verified: ' <<<"$output")" 10
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^Verified: ' <<<"$peer_output")" 10
}

# On the wire: every pair runs across the two hosts while host A captures (trace/trace, one boot for
# all), and the opcodes each side put on the wire are compared. "->" is requester to responder.
wire_batch() { # FLOW: the scenarios, one a line (the arguments of ./lab trace)
    local cm=$([ "$1" = cm ] && echo --cm)
    printf '%s\n' "write $cm" "read $cm" "write_immediate $cm" "send_receive $cm" "send_receive_immediate $cm" \
        "atomic $cm" "sync_event $cm" "multi_conn $cm" \
        "bench $cm -- --op write --mode bw --size 4096 --iters 1 --warmup 0 --tx-depth 1"
}

# assert_wire N EXPECTED...: scenario N's packets, without the CM's messages, are EXPECTED, in order.
assert_wire() {
    local n=$1
    shift
    assert_equal "$(grep -v ' CM ' "$TRACE/$n/report.txt")" "$(printf '%s\n' "$@")"
}

assert_every_pair_on_the_wire() {
    assert_wire 1 "-> RDMA WRITE Only" "<- Acknowledge" "-> SEND Only" "<- Acknowledge"
    # The READ pair's responder answers with a response and never sends a request.
    assert_wire 2 "-> RDMA READ Request" "<- RDMA READ Response Only" "-> SEND Only" "<- Acknowledge"
    assert_wire 3 "-> RDMA WRITE Only with Immediate" "<- Acknowledge"
    assert_wire 4 "-> SEND Only" "<- Acknowledge"
    assert_wire 5 "-> SEND Only with Immediate" "<- Acknowledge"
    assert_wire 6 "-> FetchAdd" "<- ATOMIC Acknowledge" "-> CmpSwap" "<- ATOMIC Acknowledge" "-> SEND Only" "<- Acknowledge"
    # The sync event's get is a READ, repeated until the responder's value has changed.
    assert_regex "$(grep -v ' CM ' "$TRACE/7/report.txt" | tr '\n' ';')" \
        '^-> RDMA WRITE Only;<- Acknowledge;(-> RDMA READ Request;<- RDMA READ Response Only;)+-> RDMA WRITE Only;<- Acknowledge;-> SEND Only;<- Acknowledge;$'
    # Two connections, one SEND each: their packets may interleave.
    assert_equal "$(grep -v ' CM ' "$TRACE/8/report.txt" | sort | tr '\n' ';')" "-> SEND Only;-> SEND Only;<- Acknowledge;<- Acknowledge;"
}

# said N SIDE LINE...: scenario N's SIDE (requester or responder) printed each LINE, whole.
said() {
    local n=$1 side=$2 line
    shift 2
    for line in "$@"; do
        grep -qxF -- "$line" "$TRACE/$n/$side.out" || fail "scenario $n ($(head -n 3 "$TRACE/$n/names" | tr '\n' ' ')): the $side did not print: $line
$(cat "$TRACE/$n/$side.out")"
    done
}

# every_scenario_succeeded: both sides of every scenario in $TRACE ended with success.
every_scenario_succeeded() {
    local d
    for d in "$TRACE"/[0-9]*; do
        said "${d##*/}" responder "Sample finished successfully"
        said "${d##*/}" requester "Sample finished successfully"
    done
}

# assert_every_pair_said_so: both sides of every scenario succeeded, and each printed what its lesson
# promises (trace's default flags: tests/pairs.bash).
assert_every_pair_said_so() {
    every_scenario_succeeded
    said 1 requester 'Requester has written: "Hello from the requester!"'
    said 1 responder 'Responder memory now holds: "Hello from the requester!"'
    said 2 requester 'Read from responder: "Hi RDMA!"'
    said 3 requester 'Requester has written: "Hi RDMA!" with immediate 0xabcd'
    said 3 responder 'Responder memory now holds: "Hi RDMA!" (8 bytes, immediate 0xabcd)'
    said 4 responder 'Got from sender: "Hello from the sender!"'
    said 5 responder 'Got from sender: "Hello with an immediate!" with immediate: 0xabcd'
    said 6 requester "Fetch-and-add: old value 40, new value 42" "Compare-and-swap: found 42, swapped"
    said 6 responder "Final counter value: 7 (0x7)"
    said 7 requester "Received sync event value 0xd0cb" "Remote sync event has been notified for completion successfully"
    said 7 responder "Signaling sync event" "Sync event completion value 0xffffffffffffffff received"
    assert_equal "$(grep -c 'one message per connection' "$TRACE/8/responder.out")" 2
}

# capture_every_pair FLOW: run wire_batch FLOW through trace/trace (the build under test); the
# opcodes of scenario N land in $TRACE/N/report.txt.
capture_every_pair() {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    wire_batch "$1" >"$BATS_TEST_TMPDIR/batch"
    run env RDMA_SAMPLES_BUILD_DIR="$RDMA_SAMPLES_BUILD" "$RDMA_SAMPLES_SOURCE/trace/trace" --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
}

# rdma_bench's 4 KiB WRITE at path MTU 1024: First, Middle, Middle, Last and one ACK for all four.
assert_write_in_four_packets() {
    assert_regex "$(tr '\n' ';' <"$TRACE/$1/report.txt")" \
        ';-> RDMA WRITE First;-> RDMA WRITE Middle;-> RDMA WRITE Middle;-> RDMA WRITE Last;<- Acknowledge;'
}

@test "two hosts: on the wire, every pair with descriptor files: the opcodes of each" {
    capture_every_pair files
    assert_every_pair_on_the_wire
    assert_write_in_four_packets 9
    assert_every_pair_said_so
    # Each side addresses the other by the GID of its own machine's interface.
    assert grep -qF 'GID index 1 (::ffff:10.77.0.2)' "$TRACE/1/requester.out"
    assert grep -qF 'GID index 1 (::ffff:10.77.0.1)' "$TRACE/1/responder.out"
}

@test "two hosts: on the wire, every pair with RDMA CM: the CM's REQ, REP, RTU first, then the same opcodes" {
    capture_every_pair cm
    local n
    for n in 1 2 3 4 5 6 7 9; do
        # The connection: a REQ from the client, the server's REP, the client's RTU, before any data.
        assert_equal "$(head -n 3 "$TRACE/$n/report.txt")" \
            "$(printf '%s\n' "-> CM REQ (connect request)" "<- CM REP (connect reply)" "-> CM RTU (ready to use)")"
        assert grep -q 'CM DREQ' "$TRACE/$n/report.txt"
    done
    # Under -cm a pair that exports memory SENDs its descriptor first (the server to the client).
    for n in 1 2 3 6 7; do
        assert_equal "$(grep -v ' CM ' "$TRACE/$n/report.txt" | head -n 2 | tr '\n' ';')" "<- SEND Only;-> Acknowledge;"
        sed -i '/ CM /d' "$TRACE/$n/report.txt"
        sed -i '1,2d' "$TRACE/$n/report.txt"
    done
    assert_every_pair_on_the_wire
    assert_equal "$(grep -c 'CM REQ' "$TRACE/8/report.txt")" 2
    assert_write_in_four_packets 9
    assert_every_pair_said_so
    # No files: everything, the mmap descriptor included, travelled in-band; every server saw host B.
    for n in 1 2 3 4 5 6 7; do
        assert_equal "$(ls -A "$TRACE/$n/share")" ""
        assert grep -q 'connection established from 10.77.0.2' "$TRACE/$n/responder.out"
    done
}

# A faulty link: tc netem on both hosts' eth0 drops packets at random (trace --netem).
# lossy_batch SPEC: every pair in both flows over that link, as trace --batch lines.
lossy_batch() {
    { wire_batch files; wire_batch cm; } | sed "s/^\([a-z_]*\)/\1 --netem '$1' --timeout 30/"
}

# retransmitted: the rxe counters of host B (the requester) show retransmissions in some scenario.
retransmitted() {
    local d n=0
    for d in "$TRACE"/[0-9]*; do
        n=$((n + $(LC_ALL=C join "$d/counters-b.before" "$d/counters-b.after" |
            awk '$1 ~ /\/(completer_retry_err|rcvd_seq_err|duplicate_request)$/ { n += $3 - $2 } END { print n + 0 }')))
    done
    echo "retransmission counters on host B: $n"
    assert [ "$n" -gt 0 ]
}

# cm_paths: for every -cm scenario, which way its server's connection became ESTABLISHED (cm_accept()):
# "at once" (one REP, one RTU), "REP resent" (the RTU or REP was lost: the CM resent its REP, seconds
# later), or "DISCONNECTED first" (the client was done and gone before its RTU arrived). Printed as a
# TAP comment, so the run shows which paths it took; IBV_EVENT_COMM_EST must play no part in any.
cm_paths() {
    local d at_once=0 resent=0 gone=0
    for d in "$TRACE"/[0-9]*; do
        [ -e "$d/cm" ] || continue
        if grep -q 'disconnected before its RTU arrived' "$d/responder.out"; then
            gone=$((gone + 1))
        elif [ "$(grep -c 'CM REP' "$d/report.txt")" -gt 1 ]; then
            resent=$((resent + 1))
        else
            at_once=$((at_once + 1))
        fi
        refute grep -q 'COMM_EST' "$d/responder.out"
    done
    echo "# RDMA CM paths to ESTABLISHED: $at_once at once, $resent after a resent REP, $gone DISCONNECTED first" >&3
}

@test "two hosts: 1% and 5% packet loss both ways: every pair, both flows, succeeds through retransmissions" {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    { lossy_batch 'loss 1%'; lossy_batch 'loss 5%'; } >"$BATS_TEST_TMPDIR/batch"
    run env RDMA_SAMPLES_BUILD_DIR="$RDMA_SAMPLES_BUILD" "$RDMA_SAMPLES_SOURCE/trace/trace" --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
    every_scenario_succeeded
    retransmitted
    cm_paths
}

@test "two hosts: 100% loss: the requester fails with an explained retry error, within -t, and so does the responder" {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    printf '%s\n' "write --netem 'loss 100%' --timeout 5" "write --cm --netem 'loss 100%' --timeout 5" >"$BATS_TEST_TMPDIR/batch"
    run env RDMA_SAMPLES_BUILD_DIR="$RDMA_SAMPLES_BUILD" "$RDMA_SAMPLES_SOURCE/trace/trace" --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
    # Descriptor files still cross (the shared folder), the WRITE never does: 7 retries, then the error.
    # (trace warms ARP first: with a cold cache, ibv_modify_qp(RTR) itself would time out on ARP.)
    run cat "$TRACE/1/requester.out"
    assert_line --regexp '^requester: step 7 failed: the RDMA WRITE completed with IBV_WC_RETRY_EXC_ERR'
    assert_line --regexp '^hint: '
    assert [ "$(cat "$TRACE/1/requester.ms")" -le 5000 ]
    run cat "$TRACE/1/responder.out"
    assert_line --regexp '^responder: step [0-9]+ failed: timed out after 5 s waiting for '
    # With RDMA CM the connect request never arrives (the CM resends it): the client gives up at -t.
    run cat "$TRACE/2/requester.out"
    assert_line --regexp '^requester: step 4 failed: timed out after 5 s waiting for the server to accept'
    assert_line --regexp '^hint: '
    assert [ "$(cat "$TRACE/2/requester.ms")" -le 10000 ]
    run cat "$TRACE/2/responder.out"
    assert_line --regexp '^responder: step [0-9]+ failed: timed out after 5 s waiting for '
}

# --- rdma_multi_conn with a shared receive queue (--srq) ---------------------------------------------

@test "two hosts: rdma_multi_conn --srq with descriptor files, 4 connections on one SRQ on host A" {
    on_host_a "$(prog rdma_multi_conn_receive)" -nc 4 --srq --srq-limit 4 -ld "$SHARE/recv.desc" -re "$SHARE/send.desc" -t 60
    on_host_b "$(prog rdma_multi_conn_send)" -nc 4 -ld "$SHARE/send.desc" -re "$SHARE/recv.desc" -t 60 -s "to the SRQ"
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "        receive memory with one SRQ:   4 receives x 256 bytes = 1024 bytes, shared by all 4"
    assert_peer_line --partial "IBV_EVENT_SRQ_LIMIT_REACHED: fewer than 4 receives"
    local i
    for i in 0 1 2 3; do
        assert_peer_line "Got from sender: \"to the SRQ\", connection $i"
    done
}

@test "two hosts: rdma_multi_conn --srq with RDMA CM, a server on host A for 4 client processes on host B" {
    on_host_a "$(prog rdma_multi_conn_receive)" -cm -nc 4 --srq -t 60
    four_senders_on_host_b "SRQ client"
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "step 4: post 4 receives into the SRQ, arm its limit at 2"
    local i
    for i in 0 1 2 3; do
        assert_peer_line --regexp "^Got from sender: \"SRQ client $i\", connection [0-3]$"
    done
}
