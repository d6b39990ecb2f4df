#!/usr/bin/env bats
# rdma_ud: numbered datagrams on a UD QP, by descriptor files and by RDMA CM (RDMA_PS_UDP); what UD
# drops without a word (wrong Q_Key or QPN, no receive posted, above the MTU), refuses (READ, WRITE)
# or cannot address (a GID nobody has).
# Run with run-bats --cm (the RDMA CM tests need the device on an interface with an address).

load test_helper/common

setup() {
    require_rdma_device
    SENDER=$(prog rdma_ud_send)
    RECEIVER=$(prog rdma_ud_receive)
}

sender_paths() { echo -ld "$BATS_TEST_TMPDIR/sender.desc" -re "$BATS_TEST_TMPDIR/receiver.desc"; }
receiver_paths() { echo -ld "$BATS_TEST_TMPDIR/receiver.desc" -re "$BATS_TEST_TMPDIR/sender.desc"; }

@test "ud: three numbered datagrams arrive, with the sender's QPN and GID read from the completion and the header" {
    run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 -s "over UD"
    assert_success
    assert_line --partial "step 3: create a completion queue and a UD queue pair, and move the QP INIT -> RTR -> RTS"
    assert_line --regexp "^Sender has sent 3 datagrams to QPN 0x[0-9a-f]{6}"
    assert_line --index -1 "Sample finished successfully"
    assert_equal "$peer_status" 0
    local qpn
    qpn=$(grep -o 'QPN 0x[0-9a-f]*, state RTS' <<<"$output" | cut -d' ' -f2 | tr -d ,)
    assert_peer_line --regexp "^ +datagram of [0-9]+ bytes \(40 \+ [0-9]+\) from QPN $qpn, GID ::ffff:"
    assert_peer_line 'Got #1/3 from sender: "over UD"'
    assert_peer_line 'Got #3/3 from sender: "over UD"'
    assert_peer_line "Received 3 of 3 datagrams"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "ud: a wrong Q_Key: every datagram is dropped, the sender sees success, the receiver's timeout names the Q_Key" {
    RUN_FLAGS=-0 run_pair "$RECEIVER" $(receiver_paths) -t 5 -- "$SENDER" $(sender_paths) -t 20 --qkey 0x2222
    assert_line --partial "(demonstration) our SENDs carry Q_Key 0x00002222; the receiver accepts 0x11111111"
    assert_line --partial "Sender has sent 3 datagrams"
    assert_equal "$peer_status" 1
    assert_peer_line "receiver: step 6 failed: timed out after 5 s waiting for a datagram from the sender"
    assert_peer_line --partial "hint: nothing arrived, and UD never says why: our device drops a datagram whose Q_Key is not ours (0x11111111)"
}

@test "ud: a datagram that finds no receive is dropped, yet the sender's completion says success" {
    RUN_FLAGS=-0 run_pair "$RECEIVER" $(receiver_paths) -t 20 --receives 1 -- "$SENDER" $(sender_paths) -t 20
    assert_line --partial "SEND #3 completed: IBV_WC_SUCCESS"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "(demonstration: fewer than the datagrams)"
    assert_peer_line "Got #1/3 from sender: \"Hi RDMA!\""
    assert_peer_line "Received 1 of 3 datagrams; lost: #2 #3"
    assert_peer_line "receiver: step 7 failed: 2 of 3 datagrams never arrived: #2 #3"
    assert_peer_line --partial "hint: only 1 receive(s) were posted: a datagram that finds none is dropped"
}

@test "ud: a datagram above the MTU: no error on the sender (IBTA C10-93.1.1), never seen by the receiver" {
    RUN_FLAGS=-0 run_pair "$RECEIVER" $(receiver_paths) -t 20 -- "$SENDER" $(sender_paths) -t 20 --over-mtu
    assert_line --regexp "\(demonstration\) datagram #1 is [0-9]+ bytes, one above the MTU of [0-9]+"
    # Soft-RoCE completes it successfully, as the IBTA says; a device that reports an error is named.
    assert_line --regexp "SEND #1 (completed: IBV_WC_SUCCESS|\(above the MTU\) completed with IBV_WC_)"
    assert_equal "$peer_status" 1
    assert_peer_line "Received 2 of 3 datagrams; lost: #1"
    refute_peer_line --partial "Got #1/3"
}

# The receiver's descriptor is rewritten on its way to the sender (spoil_in_flight), as a wrong copy
# between machines would be: the sender addresses a GID or a QPN other than the receiver's.
spoiled_pair() { # SED_EXPR: the receiver (-t 5) in the background, the sender under run
    local T=$BATS_TEST_TMPDIR
    rm -f "$T"/*.desc # (the files of an earlier pair in the same test)
    start_peer receiver "$RECEIVER" -ld "$T/real.desc" -re "$T/sender.desc" -t 5
    spoil_in_flight "$T/real.desc" "$T/receiver.desc" "$1"
    run --separate-stderr timeout -k 5 60 "$SENDER" $(sender_paths) -t 5
    wait_peer receiver
}

@test "ud: a peer GID nobody has: ibv_create_ah() fails within seconds (no ARP answer, or no route), explained" {
    # The address handle needs the peer's MAC address: for an IPv4-mapped GID on the device's subnet
    # that nobody holds, the kernel's ARP gets no answer and ibv_create_ah() returns ETIMEDOUT (about
    # 2.5 s on rxe in the VM; the kernel bounds it, not -t). An fe80:: GID against our IPv4-mapped one:
    # EINVAL at once. Nothing is sent; the receiver hears nothing and ends at its -t.
    require_cm_addr
    local nobody=${CM_ADDR%.*}.99 start=$SECONDS
    spoiled_pair "s/^gid=.*/gid=::ffff:$nobody/"
    assert_equal "$status" 1
    assert [ $((SECONDS - start)) -le 15 ]
    assert_line "step 5: create an address handle for GID ::ffff:$nobody"
    assert_equal "${stderr_lines[0]}" "sender: step 5 failed: ibv_create_ah(::ffff:$nobody): Connection timed out (errno 110)"
    assert_regex "${stderr_lines[1]}" "^hint: no MAC address for that GID: nobody on the device's network answered ARP"
    assert_equal "$peer_status" 1
    assert_peer_line "receiver: step 6 failed: timed out after 5 s waiting for a datagram from the sender"
    spoiled_pair "s/^gid=.*/gid=fe80::1234/"
    assert_equal "$status" 1
    assert_equal "${stderr_lines[0]}" "sender: step 5 failed: ibv_create_ah(fe80::1234): Invalid argument (errno 22)"
    assert_regex "${stderr_lines[1]}" "^hint: that GID cannot be reached from our GID"
}

@test "ud: a QPN nobody has: the address handle is made, every SEND succeeds, the datagrams go nowhere" {
    # The GID is the receiver's own, so the address handle resolves and the datagrams leave; the
    # receiving device finds no QP 0xabcdef and drops them without a word (IBTA: an unknown
    # destination QP is silently dropped). Only the receiver's -t ends it.
    spoiled_pair "s/^qp_num=.*/qp_num=0xabcdef/"
    assert_equal "$status" 0
    assert_line --partial "receiver: QPN 0xabcdef"
    assert_line --partial "SEND #3 completed: IBV_WC_SUCCESS"
    assert_line --regexp "^Sender has sent 3 datagrams to QPN 0xabcdef"
    assert_equal "$peer_status" 1
    assert_peer_line "receiver: step 6 failed: timed out after 5 s waiting for a datagram from the sender"
}

@test "ud: -s is bounded at 256 bytes, so a datagram fits any MTU above 256 (else it is refused before posting)" {
    # The largest -s is 256 bytes: only a 256-byte MTU makes it too long. Find the port's MTU first.
    run_pair "$RECEIVER" $(receiver_paths) -t 20 --iters 1 -- "$SENDER" $(sender_paths) -t 20 --iters 1 -s x
    assert_success
    local mtu
    mtu=$(grep -o 'port MTU [0-9]*' <<<"$output" | head -n 1 | cut -d' ' -f3)
    [ "$mtu" -gt 256 ] || skip "the port MTU is 256: -s of 256 bytes would be refused"
    # Above any MTU a message cannot go with -s (256 bytes at most): the bound is the flag's.
    run -2 --separate-stderr "$SENDER" -s "$(printf 'x%.0s' {1..257})"
    assert_output ""
    assert_equal "${stderr_lines[0]}" "rdma_ud_send: -s: the string is 257 bytes; the limit is 256"
}

@test "ud: RDMA WRITE and READ on a UD QP are refused" {
    local op
    for op in write read; do
        RUN_FLAGS=-1 run_pair "$RECEIVER" $(receiver_paths) -t 4 --iters 1 -- "$SENDER" $(sender_paths) -t 20 --op "$op"
        assert_line --partial "(demonstration) post an RDMA ${op^^}"
        assert_line --partial "hint: UD carries SENDs only (IBTA)"
        assert_line --regexp "^sender: step 6 failed: (ibv_post_send\(RDMA ${op^^} on a UD QP\)|the RDMA ${op^^} completed with IBV_WC_)"
        assert_equal "$peer_status" 1
    done
}

@test "ud: bad input is one line and exit 2" {
    run -2 --separate-stderr "$SENDER" --op atomic
    assert_equal "${stderr_lines[0]}" 'rdma_ud_send: --op: expected write or read, got "atomic"'
    run -2 --separate-stderr "$RECEIVER" --qkey 0x80000000
    assert_equal "${stderr_lines[0]}" 'rdma_ud_receive: --qkey: expected a number from 0 to 2147483647, got "0x80000000"'
    run -2 --separate-stderr "$SENDER" --iters 65
    assert_equal "${stderr_lines[0]}" 'rdma_ud_send: --iters: expected a number from 1 to 64, got "65"'
}

@test "ud: a descriptor of another kind is refused with the file, the line and a hint" {
    printf '# x\nversion=1\nkind=connection\n' >"$BATS_TEST_TMPDIR/sender.desc"
    run -1 "$RECEIVER" $(receiver_paths) -t 5
    assert_line --partial "sender.desc line 3: kind: expected ud, got \"connection\""
    assert_line --partial "hint: the descriptor file is not one this program wrote"
}

@test "ud -cm: the address handle comes from RDMA CM (RDMA_PS_UDP), the datagrams arrive" {
    require_cm_addr
    local port=$((20000 + RANDOM % 20000))
    cm_pair "$RECEIVER" -cm -lp "$port" -t 20 -- "$SENDER" -cm -sa "$CM_ADDR" -lp "$port" -t 20 -s "via the CM"
    assert_success
    assert_line --regexp "RDMA CM: .* answered through .*: QPN 0x[0-9a-f]{6}, Q_Key 0x01234567"
    assert_equal "$peer_status" 0
    assert_peer_line --partial "Q_Key 0x01234567; INIT -> RTR"
    assert_peer_line 'Got #2/3 from sender: "via the CM"'
    assert_peer_line "Received 3 of 3 datagrams"
}

@test "ud -cm: nobody listening: the sender's lookup times out within -t, explained" {
    require_cm_addr
    run -1 timeout 30 "$SENDER" -cm -sa "$CM_ADDR" -lp 9 -t 3
    assert_line --partial "sender: step 4 failed: timed out after 3 s waiting for the UD server at"
    assert_line --partial "hint: is the receiver running with -cm and the same -lp"
}
