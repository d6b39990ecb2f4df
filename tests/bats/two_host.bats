#!/usr/bin/env bats
# Every pair across two machines: two Soft-RoCE VMs on a virtual network, descriptors crossing through a
# shared folder (the copy you would make with scp).

load test_helper/common
load test_helper/two_host

setup() {
    setup_two_hosts
}

teardown() {
    show_both_sides
    teardown_two_hosts
}

# clients_on_host_b N PROGRAM ARGS...: N copies of PROGRAM at once on host B, copy i (0 to N-1) given
# ARGS with every "{i}" in them replaced by i; fails if any of them does.
clients_on_host_b() {
    on_host_b bash -c '
        n=$1
        shift
        pids=()
        for ((i = 0; i < n; i++)); do "${@//\{i\}/$i}" & pids+=($!); done
        status=0
        for p in "${pids[@]}"; do wait "$p" || status=1; done
        exit $status' _ "$@"
}

# four_senders_on_host_b PREFIX: four rdma_multi_conn_send RDMA CM clients at once on host B, to the
# server at 10.77.0.1, client i sending "PREFIX i"; fails if any of them does.
four_senders_on_host_b() {
    clients_on_host_b 4 "$(prog rdma_multi_conn_send)" -cm -sa 10.77.0.1 -t 60 -s "$1 {i}"
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
        "bench $cm -- --op write --mode bw --size 4096 --iters 1 --warmup 0 --tx-depth 1" "extended $cm"
}

# resends N: how often a requester of scenario N sent packets again after an ACK came late (rxe's
# completer_retry_err, on either host). The two emulated VMs share a busy host: when one is not scheduled
# for longer than the QP's ACK timeout, the other resends, and the responder answers each copy.
resends() {
    local h n=0
    for h in a b; do
        n=$((n + $(counters_moved "$TRACE/$1" "$h" | awk '$1 ~ /\/completer_retry_err$/ { n += $2 } END { print n + 0 }')))
    done
    echo "$n"
}

# counters_moved DIR HOST: the rxe counters of host HOST (a or b) that moved in the scenario folder DIR
# (trace writes them before and after, sorted), "device/name delta" a line.
counters_moved() {
    LC_ALL=C join "$1/counters-$2.before" "$1/counters-$2.after" 2>/dev/null | awk '$3 != $2 { print $1, $3 - $2 }'
}

# in_order WIRE EXPECTED...: the EXPECTED lines appear in WIRE in this order, and every other line of
# WIRE is a copy of one of them (what a resend adds).
in_order() {
    local wire=$1 line i=0
    shift
    local want=("$@")
    while IFS= read -r line; do
        printf '%s\n' "${want[@]}" | grep -qxF -- "$line" || return 1
        if [ "$i" -lt "${#want[@]}" ] && [ "$line" = "${want[i]}" ]; then i=$((i + 1)); fi
    done <<<"$wire"
    [ "$i" -eq "${#want[@]}" ]
}

# assert_wire N EXPECTED...: scenario N's packets, without the CM's messages, are EXPECTED, in order;
# after a resend (see resends), EXPECTED in order with copies between them.
assert_wire() {
    local n=$1
    shift
    packets_are "$n" "scenario $n" "$(grep -v ' CM ' "$TRACE/$n/report.txt")" "$@"
}

# packets_are N WHAT WIRE EXPECTED...: WIRE (packets of scenario N) is EXPECTED, in order; after a
# resend (see resends), EXPECTED in order with copies between them. WHAT names WIRE in a failure.
packets_are() {
    local n=$1 what=$2 wire=$3
    shift 3
    if [ "$(resends "$n")" -gt 0 ]; then
        echo "# scenario $n: a requester resent after a late ACK; the copies are on the wire too" >&3
        in_order "$wire" "$@" || fail "$what: expected, in order (copies allowed):
$(printf '%s\n' "$@")
on the wire:
$wire"
    else
        assert_equal "$wire" "$(printf '%s\n' "$@")"
    fi
}

# assert_way N DIRECTION EXPECTED...: the packets of scenario N that go one way ("->" or "<-"), without
# the CM's messages, are EXPECTED in order; after a resend (see resends), with copies between them.
# (For a batch of requests: its ACKs may come back between its requests or after them all.)
assert_way() {
    local n=$1 way=$2
    shift 2
    packets_are "$n" "scenario $n, $way" "$(grep -v ' CM ' "$TRACE/$n/report.txt" | grep -F -- "$way ")" "$@"
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
    if [ "$(resends 7)" -gt 0 ]; then
        assert_wire 7 "-> RDMA WRITE Only" "<- Acknowledge" "-> RDMA READ Request" "<- RDMA READ Response Only" \
            "-> RDMA WRITE Only" "<- Acknowledge" "-> SEND Only" "<- Acknowledge"
    else
        assert_regex "$(grep -v ' CM ' "$TRACE/7/report.txt" | tr '\n' ';')" \
            '^-> RDMA WRITE Only;<- Acknowledge;(-> RDMA READ Request;<- RDMA READ Response Only;)+-> RDMA WRITE Only;<- Acknowledge;-> SEND Only;<- Acknowledge;$'
    fi
    # Two connections, one SEND each: their packets may interleave.
    if [ "$(resends 8)" -gt 0 ]; then
        assert_wire 8 "-> SEND Only" "<- Acknowledge"
        assert [ "$(grep -c -- '-> SEND Only' "$TRACE/8/report.txt")" -ge 2 ]
    else
        assert_equal "$(grep -v ' CM ' "$TRACE/8/report.txt" | sort | tr '\n' ';')" "-> SEND Only;-> SEND Only;<- Acknowledge;<- Acknowledge;"
    fi
    # The extended API's two batches: the same opcodes as the classic pairs'.
    assert_way 10 "->" "-> RDMA WRITE Only" "-> RDMA WRITE Only with Immediate" "-> SEND Only" "-> RDMA READ Request" \
        "-> FetchAdd" "-> CmpSwap" "-> SEND Only"
    assert_way 10 "<-" "<- Acknowledge" "<- Acknowledge" "<- Acknowledge" "<- RDMA READ Response Only" \
        "<- ATOMIC Acknowledge" "<- ATOMIC Acknowledge" "<- Acknowledge"
}

# said N SIDE LINE...: scenario N's SIDE (requester or responder) printed each LINE, whole.
said() {
    local n=$1 side=$2 line
    shift 2
    for line in "$@"; do
        grep -qxF -- "$line" "$TRACE/$n/$side.out" || scenario_failed "$n" "the $side did not print: $line"
    done
}

# scenario_failed N WHY: fail, with everything a reader needs to tell why: both sides' output and exit
# status, the scenario's packets, and the whole scenario folder (its capture included) kept under the
# build's meson-logs, since Bats removes the test's temporary folder.
scenario_failed() {
    local n=$1 why=$2 who kept
    kept=$BUILD/meson-logs/two_host-failed/$BATS_TEST_NUMBER-$n
    rm -rf "$kept" && mkdir -p "${kept%/*}" && cp -r "$TRACE/$n" "$kept" || kept="(not kept: could not copy)"
    {
        echo "scenario $n ($(head -n 3 "$TRACE/$n/names" | tr '\n' ' ')): $why"
        # First each side's verdict in one line (its "step N failed" line, or its last line): the end of
        # a CI log may hold only the first lines of a failure.
        for who in responder requester; do
            echo "the $who: exit status $(cat "$TRACE/$n/$who.rc" 2>/dev/null || echo '?'):" \
                "$(grep -m 1 ' failed: ' "$TRACE/$n/$who.out" 2>/dev/null || tail -n 1 "$TRACE/$n/$who.out" 2>/dev/null)"
        done
        echo "the requester ran for $(cat "$TRACE/$n/requester.ms" 2>/dev/null || echo '?') ms; host B's rxe" \
            "counters that moved: $(counters_moved "$TRACE/$n" b | awk '{ sub(/.*\//, "", $1); printf "%s+%d ", $1, $2 }')"
        for who in responder requester; do
            echo "---- the $who (exit status $(cat "$TRACE/$n/$who.rc" 2>/dev/null || echo '?')) ----"
            cat "$TRACE/$n/$who.out" 2>/dev/null
        done
        echo "---- its packets ($TRACE/$n/report.txt) ----"
        cat "$TRACE/$n/report.txt" 2>/dev/null
        echo "---- kept: $kept (tshark -r $kept/trace.pcap -V) ----"
    } | fail
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
    said 10 requester 'READ brought back: "through ibv_wr_*()"' "Compare-and-swap: found 5, swapped"
    said 10 responder 'WRITE: "through ibv_wr_*()"' "Counter after the requester's atomics: 100"
}

# capture_every_pair FLOW: run wire_batch FLOW through trace/trace (the build under test); the
# opcodes of scenario N land in $TRACE/N/report.txt.
capture_every_pair() {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    wire_batch "$1" >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
}

# rdma_bench's 4 KiB WRITE at path MTU 1024: First, Middle, Middle, Last and one ACK for all four.
# Unless an ACK came late: the two emulated VMs share a busy host, and when one is not scheduled for
# longer than the QP's ACK timeout, rxe resends the WRITE (its completer_retry_err counter rises) and
# ACKs each copy. Then the four packets are checked, and the run says it was resent.
assert_write_in_four_packets() {
    local wire resent
    wire=$(tr '\n' ';' <"$TRACE/$1/report.txt")
    resent=$(resends "$1")
    if [ "$resent" -gt 0 ]; then
        echo "# scenario $1: the requester resent its WRITE $resent time(s) after a late ACK" >&3
        assert_regex "$wire" ';-> RDMA WRITE First;-> RDMA WRITE Middle;-> RDMA WRITE Middle;-> RDMA WRITE Last;'
    else
        assert_regex "$wire" ';-> RDMA WRITE First;-> RDMA WRITE Middle;-> RDMA WRITE Middle;-> RDMA WRITE Last;<- Acknowledge;'
    fi
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
    for n in 1 2 3 4 5 6 7 9 10; do
        # The connection: a REQ from the client, the server's REP, the client's RTU, before any data.
        assert_equal "$(head -n 3 "$TRACE/$n/report.txt")" \
            "$(printf '%s\n' "-> CM REQ (connect request)" "<- CM REP (connect reply)" "-> CM RTU (ready to use)")"
        assert grep -q 'CM DREQ' "$TRACE/$n/report.txt"
    done
    # Under -cm a pair that exports memory SENDs its descriptor first (the server to the client).
    for n in 1 2 3 6 7 10; do
        assert_equal "$(grep -v ' CM ' "$TRACE/$n/report.txt" | head -n 2 | tr '\n' ';')" "<- SEND Only;-> Acknowledge;"
        sed -i '/ CM /d' "$TRACE/$n/report.txt"
        sed -i '1,2d' "$TRACE/$n/report.txt"
    done
    assert_every_pair_on_the_wire
    assert_equal "$(grep -c 'CM REQ' "$TRACE/8/report.txt")" 2
    assert_write_in_four_packets 9
    assert_every_pair_said_so
    # No files: everything, the mmap descriptor included, travelled in-band; every server saw host B.
    for n in 1 2 3 4 5 6 7 10; do
        assert_equal "$(ls -A "$TRACE/$n/share")" ""
        assert grep -q 'connection established from 10.77.0.2' "$TRACE/$n/responder.out"
    done
}

# A faulty link: tc netem on both hosts' eth0 drops packets at random (trace --netem).
# LOSSY_TIMEOUT: every wait of a scenario on that link, in seconds (-t of both sides). A wait there
# spans what the peer does meanwhile, and on a lossy link that includes the RDMA CM's resends: a lost
# RTU or REP costs about 4.7 s, a lost DREQ about 6 s ("RDMA CM messages lost on purpose" below), and at
# 5% two or three losses in one connection's life are to be expected in a run of 36 scenarios. 30 s was
# once not enough (CI, 2026-11-28: the bench's responder over RDMA CM, waiting for the goodbye at 5%,
# its requester's output not kept). What the test accepts: any number of retransmissions, each wait
# ending within 60 s. A wait that runs out fails the test with both sides' output and the capture.
LOSSY_TIMEOUT=60
# lossy_batch SPEC: every pair in both flows over that link, as trace --batch lines.
lossy_batch() {
    { wire_batch files; wire_batch cm; } | sed "s/^\([a-z_]*\)/\1 --netem '$1' --timeout $LOSSY_TIMEOUT/"
}

# retransmitted: the rxe counters of host B (the requester) show retransmissions in some scenario.
retransmitted() {
    local d n=0
    for d in "$TRACE"/[0-9]*; do
        n=$((n + $(counters_moved "$d" b |
            awk '$1 ~ /\/(completer_retry_err|rcvd_seq_err|duplicate_request)$/ { n += $2 } END { print n + 0 }')))
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
    # And 100 WRITEs of 4 KiB (4 packets each) at 5%: the pairs alone put about 200 RC packets on the
    # link, and in about one run in a hundred none of them was lost (CI, 2026-11-25: "retransmission
    # counters on host B: 0"). With the bench the counters show retransmissions every time. Its send
    # queue is 16 deep: after a loss rxe resends everything in flight (go-back-N), and at the default
    # 128 (512 packets) 200 WRITEs put about 5000 packets on the link, with about 45 retries; these put
    # about 1100, with about 24. Once in CI (2026-11-30) that responder exited 1 at 5%, why not kept
    # (scenario_failed now says it first); one cause it can have is the QP's 7 tries in a row running
    # out (a 470 ms window) while an emulated host waits for a core, and fewer retries give it fewer
    # chances.
    # rdma_recovery too: a lost NAK or ACK around its failed WRITE and its reset must not matter; nor,
    # with RDMA CM, a lost packet around the server's restart (its DREQ, the client's REQs, the REJ).
    { lossy_batch 'loss 1%'; lossy_batch 'loss 5%'
        echo "recovery --netem 'loss 1%' --timeout $LOSSY_TIMEOUT"; echo "recovery --netem 'loss 5%' --timeout $LOSSY_TIMEOUT"
        echo "recovery_cm --netem 'loss 1%' --timeout $LOSSY_TIMEOUT --restart-responder 'client 1: got #3:'"
        echo "recovery_cm --netem 'loss 5%' --timeout $LOSSY_TIMEOUT --restart-responder 'client 1: got #3:'"
        echo "bench --netem 'loss 5%' --timeout $LOSSY_TIMEOUT -- --op write --mode bw --size 4096 --iters 100 --warmup 0 --tx-depth 16"; } \
        >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
    every_scenario_succeeded
    retransmitted
    cm_paths
    # Each restarted server: its client reconnected once and had every message acknowledged.
    local names restarted=0
    for names in $(grep -l '^recovery_cm' "$TRACE"/*/names); do
        said "$(basename "$(dirname "$names")")" requester "All 6 message(s) acknowledged, over 2 connection(s)"
        restarted=$((restarted + 1))
    done
    assert_equal "$restarted" 2
}

@test "two hosts: 100% loss: the requester fails with an explained retry error, within -t, and so does the responder" {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    printf '%s\n' "write --netem 'loss 100%' --timeout 5" "write --cm --netem 'loss 100%' --timeout 5" >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts --opcodes \
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

@test "two hosts: RDMA CM messages lost on purpose: a lost RTU (REP resent, or DISCONNECTED first), a lost DREP (DREQ resent): every pair finishes" {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    # trace --lose-cm: each host loses the first such message it sends, and every second one after it.
    printf '%s\n' "write --lose-cm RTU --timeout 30" "send_receive --lose-cm RTU --timeout 30" \
        "file_transfer --lose-cm DREP --timeout 30" "multi_conn --lose-cm DREP --timeout 30" >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
    every_scenario_succeeded
    local dreq='-> CM DREQ (disconnect request)' drep='<- CM DREP (disconnect reply)'
    # The write responder can do nothing before ESTABLISHED: its CM's timer runs out, it resends the
    # REP, and the client's second RTU gets through.
    assert_equal "$(cat "$TRACE/1/lost-b")" 1
    assert_equal "$(grep -c 'CM REP' "$TRACE/1/report.txt")" 2
    assert grep -q 'RDMA CM: connection established from' "$TRACE/1/responder.out"
    # The sender needs nothing from the receiver: it has sent and disconnected long before that timer.
    assert_equal "$(grep -c 'CM REP' "$TRACE/2/report.txt")" 1
    assert grep -q 'disconnected before its RTU arrived' "$TRACE/2/responder.out"
    # A lost DREP: the client's CM resends its DREQ seconds later. The file receiver (it waits for the
    # sender's DREQ and answers it; the pairs of chapters 2 to 8 may send DREQs both ways at once) is
    # gone by then, and its kernel answers for the cm_id it no longer has.
    assert_equal "$(cat "$TRACE/3/lost-a")" 1
    assert_equal "$(grep ' CM D' "$TRACE/3/report.txt")" "$(printf '%s\n' "$dreq" "$dreq" "$drep")"
    # The multi_conn server lives on to serve its second client: it lets the first one's cm_id go once
    # it answered (a cm_id kept past TIMEWAIT ignores a resent DREQ, and the client would wait out -t).
    assert_equal "$(cat "$TRACE/4/lost-a")" 2
    assert_equal "$(grep ' CM D' "$TRACE/4/report.txt")" "$(printf '%s\n' "$dreq" "$dreq" "$drep" "$dreq" "$dreq" "$drep")"
}

# ---------------------------------------------------------------------------------------------------
# rdma_file_transfer across two machines: the receiver on host A, the sender on host B (RDMA CM only).
# Every copy is compared with cmp, and sha256sum runs on each machine for its own file: host B hashes
# what it sends, host A what it kept.

FT_CHUNK=4096
FT_SLOTS=4

# ft_files: "NAME BYTES RING_FLAGS" a line: the sizes at the edges of a ring of FT_SLOTS x FT_CHUNK, and
# 64 MiB of random bytes in a ring of 8 x 1 MiB.
ft_files() {
    local ring="--chunk $FT_CHUNK --slots $FT_SLOTS" size
    for size in 0 1 $((FT_CHUNK - 1)) $FT_CHUNK $((FT_CHUNK + 1)) $((FT_SLOTS * FT_CHUNK + 1)); do
        echo "f$size $size $ring"
    done
    echo "big $((64 << 20)) --chunk 1048576 --slots 8"
}

@test "two hosts: rdma_file_transfer, sizes 0, 1, chunk - 1, chunk, chunk + 1, slots x chunk + 1 and 64 MiB: cmp and sha256sum on both ends" {
    mkdir -p "$SHARE/src"
    ft_files >"$SHARE/files"
    local name size ring
    while read -r name size ring; do
        head -c "$size" /dev/urandom >"$SHARE/src/$name"
    done <"$SHARE/files"
    # One receiver after another, each on a port of its own: a sender that comes before its receiver
    # listens is refused (REJECTED, status 8) and tries again until -t.
    on_host_a bash -c '
        i=0
        while read -r name size ring; do
            i=$((i + 1))
            mkdir -p /tmp/in
            "$1" -lp $((13700 + i)) -o "/tmp/in/$name" $ring -t 60 || exit 1
            sha256sum "/tmp/in/$name" | sed "s/^/host A: /"
            cmp "$2/src/$name" "/tmp/in/$name" && echo "host A: cmp $name: identical"
        done <"$2/files"' _ "$(prog rdma_file_receiver)" "$SHARE"
    on_host_b bash -c '
        i=0
        while read -r name size ring; do
            i=$((i + 1))
            sha256sum "$2/src/$name" | sed "s/^/host B: /"
            "$1" -sa 10.77.0.1 -lp $((13700 + i)) -t 60 "$2/src/$name" || exit 1
        done <"$2/files"' _ "$(prog rdma_file_sender)" "$SHARE"
    assert_success
    assert_equal "$peer_status" 0
    local digest_a digest_b
    while read -r name size ring; do
        digest_b=$(sed -n "s|^host B: \([0-9a-f]\{64\}\)  $SHARE/src/$name\$|\1|p" <<<"$output")
        digest_a=$(sed -n "s|^host A: \([0-9a-f]\{64\}\)  /tmp/in/$name\$|\1|p" <<<"$peer_output")
        assert_equal "$digest_a" "$digest_b"
        assert_equal "$digest_b" "$(sha256sum <"$SHARE/src/$name" | cut -d' ' -f1)"
        assert_line "Receiver's digest matches ours: $digest_b"
        assert_peer_line "host A: cmp $name: identical"
    done <"$SHARE/files"
    assert_equal "$(grep -c '^Sample finished successfully$' <<<"$output")" 7
    assert_equal "$(grep -c '^Sample finished successfully$' <<<"$peer_output")" 7
    assert_line --regexp '^sent 67108864 bytes in [0-9.]+ s, [0-9.]+ MB/s$'
    assert_peer_line --regexp '^received 67108864 bytes in [0-9.]+ s, [0-9.]+ MB/s$'
    echo "# 64 MiB across the two hosts: $(grep '^sent 67108864 ' <<<"$output")" >&3
}

# Chunks of 4 KiB, 4 packets each at path MTU 1024: with 64 KiB chunks (64 packets a WRITE) one run at
# 5% loss (2 MiB) ended in IBV_WC_RETRY_EXC_ERR on the sender after 49 s.
@test "two hosts: 1% and 5% packet loss both ways: rdma_file_transfer copies 1 MiB, the digests match" {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    # The VMs see this test's folders under /tmp only when one is the current directory (tests/vm/vm).
    mkdir -p "$BATS_TEST_TMPDIR/src"
    cd "$BATS_TEST_TMPDIR/src"
    head -c $((1 << 20)) /dev/urandom >random.bin
    local n spec
    n=0
    for spec in 'loss 1%' 'loss 5%'; do
        n=$((n + 1))
        echo "file_transfer --netem '$spec' --timeout 60 --responder '-o $TRACE/$n/share/copy --chunk 4096 --slots 4' -- $PWD/random.bin"
    done >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts --opcodes \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
    every_scenario_succeeded
    retransmitted
    local digest
    digest=$(sha256sum <random.bin | cut -d' ' -f1)
    for n in 1 2; do
        cmp random.bin "$TRACE/$n/share/copy"
        assert_equal "$(sha256sum <"$TRACE/$n/share/copy" | cut -d' ' -f1)" "$digest"
        said "$n" requester "Receiver's digest matches ours: $digest"
        said "$n" responder "$digest  $TRACE/$n/share/copy"
        echo "# $(head -n 3 "$TRACE/$n/names" | tail -n 1): $(grep '^sent ' "$TRACE/$n/requester.out")" >&3
    done
}

# ---------------------------------------------------------------------------------------------------
# rdma_ud across the two hosts: unreliable datagrams in both flows, on the wire, and over a link that
# loses packets. The receiver runs on host A, the sender on host B, through trace/trace (one boot of
# the two VMs for all of a test's scenarios). This block uses only the helpers below.

# ud_trace LINE...: run the scenarios (the arguments of ./lab trace, one per LINE) with full ladders;
# scenario N's outputs, capture and report land in $TRACE/N.
ud_trace() {
    require_vm
    TRACE=$BATS_TEST_TMPDIR/trace
    printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/batch"
    run trace_on_hosts \
        --batch "$BATS_TEST_TMPDIR/batch" --out "$TRACE"
    assert_success
}

# ud_opcodes N: scenario N's packets as "DIRECTION OPCODE", one a line ("->" is host B to host A).
ud_opcodes() {
    python3 "$RDMA_SAMPLES_SOURCE/trace/ladder.py" --opcodes "$TRACE/$1/trace.pcap" --requester 10.77.0.2 \
        --responder 10.77.0.1
}

# ud_said N SIDE LINE...: scenario N's SIDE (requester: the sender, responder: the receiver) printed
# each LINE, whole.
ud_said() {
    local n=$1 side=$2 line
    shift 2
    for line in "$@"; do
        grep -qxF -- "$line" "$TRACE/$n/$side.out" || fail "scenario $n: the $side did not print: $line
$(cat "$TRACE/$n/$side.out")"
    done
}

# losses_named N GOT_REGEX: scenario N's receiver took some but not all of 64 numbered datagrams (its
# lines matching GOT_REGEX), named each missing number and none it got, and failed at step 7 saying so;
# on the wire at host A, exactly the datagrams that arrived, each PSN once (no retransmission).
losses_named() {
    local n=$1 out=$TRACE/$1/responder.out received lost missing k
    received=$(sed -n 's/^Received \([0-9]*\) of 64 datagrams; lost:.*/\1/p' "$out")
    lost=$(sed -n 's/^Received [0-9]* of 64 datagrams; lost: //p' "$out")
    assert [ -n "$received" ]
    assert [ "$received" -gt 0 ]
    assert [ "$received" -lt 64 ]
    missing=$(wc -w <<<"$lost")
    assert_equal "$missing" $((64 - received))
    assert_equal "$(grep -c "$2" "$out")" "$received"
    for k in $lost; do
        refute grep -q "^Got ${k}/64 " "$out"
    done
    ud_said "$n" responder "receiver: step 7 failed: $missing of 64 datagrams never arrived: $lost" \
        "Sample finished with errors"
    assert_equal "$(ud_opcodes "$n" | grep -c '^-> UD SEND Only$')" "$received"
    refute grep -q "again: retransmission" "$TRACE/$n/report.txt"
}

@test "two hosts: rdma_ud, descriptor files and RDMA CM: UD SEND Only packets with a DETH (Q_Key, source QP), no ACK" {
    ud_trace "ud" "ud --cm"
    local n qpn
    for n in 1 2; do
        ud_said $n requester "Sample finished successfully"
        ud_said $n responder 'Got #1/3 from sender: "a numbered datagram"' 'Got #3/3 from sender: "a numbered datagram"' \
            "Received 3 of 3 datagrams" "Sample finished successfully"
        # The receiver names the sender by the completion's src_qp and by the header's source address.
        qpn=$(grep -o 'QPN 0x[0-9a-f]*, state RTS' "$TRACE/$n/requester.out" | cut -d' ' -f2 | tr -d ,)
        assert grep -qE "^ +datagram of 64 bytes \(40 \+ 24\) from QPN $qpn, GID ::ffff:10\.77\.0\.2$" "$TRACE/$n/responder.out"
        # The 40 bytes before the payload, as rxe writes them for RoCE v2 over IPv4: 20 zero bytes, then
        # the IPv4 header as it arrived (length 76, DF, TTL 64, UDP, from 10.77.0.2 to 10.77.0.1).
        assert grep -qxE " +bytes  0-19:( 00){20}" "$TRACE/$n/responder.out"
        assert grep -qxE " +bytes 20-39: 45 00 00 4c( [0-9a-f]{2}){2} 40 00 40 11( [0-9a-f]{2}){2} 0a 4d 00 02 0a 4d 00 01" \
            "$TRACE/$n/responder.out"
        # Each datagram carries the receiver's Q_Key and the sender's QPN in its DETH.
        assert_equal "$(grep -cE "UD SEND Only -+>\|  QP 0x[0-9a-f]{6} PSN 0x[0-9a-f]{6}  Q_Key 0x$([ $n = 1 ] && echo 11111111 || echo 01234567), source QP $qpn; 24 bytes \"#[1-3]/3 a numbered datagram\"" \
            "$TRACE/$n/report.txt")" 3
    done
    # Three datagrams, nothing back: no ACK, no response.
    assert_equal "$(ud_opcodes 1)" "$(printf -- '-> UD SEND Only\n%.0s' 1 2 3)"
    # RDMA CM on RDMA_PS_UDP: one lookup and its reply (MADs to QP 1), then the same three datagrams.
    assert_equal "$(ud_opcodes 2)" "$(printf -- '-> CM SIDR REQ (service lookup)\n<- CM SIDR REP (lookup reply)\n'; printf -- '-> UD SEND Only\n%.0s' 1 2 3)"
    assert_equal "$(ls -A "$TRACE/2/share")" ""
}

# (Descriptor files only: with -cm the lookup's requests and replies may be lost too; when every
# request within -t is, the sample ends there before any datagram. Chapter 12 says so.)
@test "two hosts: rdma_ud over a link that loses 20% of packets: every SEND succeeds, the receiver names each lost datagram, nothing is resent" {
    ud_trace "ud --netem 'loss 20%' --timeout 10 --responder '--iters 64' -- --iters 64 -s lossy" \
        "ud --netem 'loss 20%' --timeout 10 --responder '--iters 64' -- --iters 64 -s 'lossy again'"
    local n text
    for n in 1 2; do
        text=$([ $n = 1 ] && echo lossy || echo "lossy again")
        # The sender: 64 successful completions; a completion says only that the datagram left.
        ud_said $n requester "Sample finished successfully"
        assert_equal "$(cat "$TRACE/$n/requester.rc")" 0
        assert_equal "$(grep -c '^        SEND #[0-9]* completed: IBV_WC_SUCCESS$' "$TRACE/$n/requester.out")" 64
        # The receiver: what came, and by number what did not; on the wire, nothing resent.
        losses_named $n "^Got #[0-9]*/64 from sender: \"$text\""
        assert grep -q "^hint: UD does not retransmit" "$TRACE/$n/responder.out"
        assert_equal "$(ud_opcodes $n | grep -c '^<-')" 0 # and nothing sent back
    done
}

# --- rdma_srq: a shared receive queue ------------------------------------------------------------------

@test "two hosts: rdma_srq with descriptor files, 4 connections on one SRQ on host A" {
    on_host_a "$(prog rdma_srq_receive)" -nc 4 --srq-limit 4 -ld "$SHARE/recv.desc" -re "$SHARE/send.desc" -t 60
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

@test "two hosts: rdma_srq with RDMA CM, a server on host A for 4 client processes on host B" {
    on_host_a "$(prog rdma_srq_receive)" -cm -nc 4 -t 60
    four_senders_on_host_b "SRQ client"
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line "step 4: post 4 receives into the SRQ, arm its limit at 2"
    local i
    for i in 0 1 2 3; do
        assert_peer_line --regexp "^Got from sender: \"SRQ client $i\", connection [0-3]$"
    done
}

@test "two hosts: rdma_recovery, descriptor files: WRITE #4 refused, both QPs reset, the second round of files crosses too" {
    on_host_a "$(prog rdma_recovery_responder)" $(responder_on_a)
    on_host_b "$(prog rdma_recovery_requester)" $(requester_on_b)
    assert_success
    assert_line "WRITE #4: IBV_WC_REM_ACCESS_ERR (remote access error)"
    assert_line "Requester has written 6 WRITE(s), every one completed successfully"
    assert_equal "$peer_status" 0
    assert_peer_line '  slot 6: "write #6"'
}

@test "two hosts: rdma_recovery with RDMA CM: a server on host A, a client on host B" {
    on_host_a "$(prog rdma_recovery_server)" -lp "$PORT" -t 60
    on_host_b "$(prog rdma_recovery_client)" -sa 10.77.0.1 -lp "$PORT" -t 60 --count 4
    assert_success
    assert_line "All 4 message(s) acknowledged, over 1 connection(s)"
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^ +client 1 from 10\.77\.0\.2 port [0-9]+: connected, slots sent'
    assert_peer_line "client 1: 4 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
}

@test "two hosts: rdma_memory, a type 2 window on host A written from host B; a type 1 window over RDMA CM" {
    on_host_a "$(prog rdma_memory_window_responder)" -ld "$SHARE/responder.desc" -re "$SHARE/requester.desc" -t 60
    on_host_b "$(prog rdma_memory_window_requester)" -ld "$SHARE/requester.desc" -re "$SHARE/responder.desc" -t 60 \
        -w "from host B"
    assert_success
    assert_line 'Wrote "from host B" through the window'
    assert_equal "$peer_status" 0
    assert_peer_line 'Window holds: "from host B"'
    assert_peer_line "Since the revocation: all 4096 bytes unchanged"
    on_host_a "$(prog rdma_memory_window_responder)" -cm -lp "$PORT" -t 60 --type 1
    on_host_b "$(prog rdma_memory_window_requester)" -cm -sa 10.77.0.1 -lp "$PORT" -t 60 -w "type 1, over RDMA CM"
    assert_success
    assert_equal "$peer_status" 0
    assert_peer_line 'Window holds: "type 1, over RDMA CM"'
    assert_peer_line --partial "step 8: revoke the window: bind it again with length 0"
}

@test "two hosts: rdma_event_loop, one server thread on host A echoes for 8 clients on host B at once" {
    on_host_a "$(prog rdma_event_loop_server)" -lp "$PORT" -t 60 --clients 8
    clients_on_host_b 8 "$(prog rdma_event_loop_client)" -sa 10.77.0.1 -lp "$PORT" -t 60 --count 5 -s "from host B, client {i}"
    assert_success
    assert_line 'echo 5: "from host B, client 7 #5" (24 bytes), byte for byte as sent'
    assert_equal "$(grep -c '^All 5 echoes match what was sent$' <<<"$output")" 8
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "^connection [0-7] established from 10\.77\.0\.2 port [0-9]+$"
    assert_peer_line --partial "Served 8 client(s): 8 finished, 0 dropped; 40 message(s) echoed"
}

@test "two hosts: rdma_multicast, receivers on both hosts, the sender on host B: every receiver gets every datagram" {
    local group=239.7.$((RANDOM % 250)).$((1 + RANDOM % 250))
    # Two receivers on host A, one on host B, each writing to the shared folder; the sender starts once
    # all three have attached (a datagram sent before is not theirs).
    on_host_a bash -c 'for i in 1 2; do "$1" --group "$2" -t 60 >"$3/a$i.log" 2>&1 & done; wait' \
        _ "$(prog rdma_multicast_receive)" "$group" "$SHARE"
    on_host_b bash -c '"$1" --group "$3" -t 60 >"$4/b1.log" 2>&1 &
        timeout 60 bash -c "until grep -qs attached $4/a1.log && grep -qs attached $4/a2.log && grep -qs attached $4/b1.log; do sleep 0.1; done" || exit 9
        "$2" --group "$3" -t 60 -s "to both hosts" || exit $?
        wait' _ "$(prog rdma_multicast_receive)" "$(prog rdma_multicast_send)" "$group" "$SHARE"
    cat "$SHARE"/a1.log "$SHARE"/b1.log
    assert_success
    assert_line "Sender has sent 3 datagrams to group $group (no acknowledgement: only the receivers know what arrived)"
    local f
    for f in a1 a2 b1; do
        assert grep -qx 'Got #1/3 from QPN 0x[0-9a-f]*: "to both hosts"' "$SHARE/$f.log"
        assert grep -qx "Received 3 of 3 datagrams" "$SHARE/$f.log"
        assert grep -qx "Sample finished successfully" "$SHARE/$f.log"
    done
}

@test "two hosts: rdma_multicast over a link that loses 20% of packets: the receiver names each lost datagram, nothing is resent" {
    ud_trace "multicast --netem 'loss 20%' --timeout 10 --responder '--iters 64' -- --iters 64 -s lossy"
    ud_said 1 requester "Sample finished successfully"
    losses_named 1 '^Got #[0-9]*/64 from QPN 0x[0-9a-f]*: "lossy"'
    # Each to the group's IP address and MAC (01:00:5e and the group's low 23 bits), to QP 0xFFFFFF.
    assert_equal "$(tshark -r "$TRACE/1/trace.pcap" -Y infiniband -T fields -e eth.dst -e ip.dst -e infiniband.bth.destqp 2>/dev/null | sort -u)" \
        "$(printf '01:00:5e:01:02:03\t239.1.2.3\t0xffffff')"
}
