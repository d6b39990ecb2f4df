#!/usr/bin/env bats
# rdma_multicast: one sender, several receivers of one IPv4 group, joined through RDMA CM
# (RDMA_PS_UDP); interop with librdmacm's mckey both ways; what a receiver says when nothing comes.
# Run with run-bats --cm (a join needs the device on an interface with an IPv4 address).

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    SENDER=$(prog rdma_multicast_send)
    RECEIVER=$(prog rdma_multicast_receive)
    # mckey's lines reach a file only at its exit unless its stdout is line-buffered (stdbuf -oL)
    MCKEY=("$(device_path /usr/bin/stdbuf)" -oL mckey)
    GROUP=239.1.$((RANDOM % 250)).$((1 + RANDOM % 250)) # a group of this test's own
}

# receivers N [ARGS...]: start N receivers of $GROUP (receiver1 .. receiverN) and wait until each has
# attached its QP: a datagram sent before that is not theirs.
receivers() {
    local n=$1 i
    shift
    for ((i = 1; i <= n; i++)); do
        start_peer "receiver$i" "$RECEIVER" --group "$GROUP" -t 20 "$@"
    done
    for ((i = 1; i <= n; i++)); do
        wait_line "receiver$i" "attached to $GROUP"
    done
}

@test "multicast: three receivers on one device each get every numbered datagram, one copy each" {
    receivers 3
    run -0 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 -s "to the group"
    assert_line --regexp "^ +joined $GROUP as a send-only full member: MGID ::ffff:$GROUP, QPN 0xffffff, Q_Key 0x01234567$"
    assert_line "Sender has sent 3 datagrams to group $GROUP (no acknowledgement: only the receivers know what arrived)"
    local sender_qpn i
    sender_qpn=$(grep -o 'QPN 0x[0-9a-f]*, state RTS' <<<"$output" | cut -d' ' -f2 | tr -d ,)
    for i in 1 2 3; do
        wait_peer "receiver$i"
        assert_equal "$peer_status" 0
        assert_peer_line --regexp "^ +joined $GROUP as a full member: MGID ::ffff:$GROUP, QPN 0xffffff, Q_Key 0x01234567$"
        assert_peer_line "Got #1/3 from QPN $sender_qpn: \"to the group\""
        assert_peer_line "Got #3/3 from QPN $sender_qpn: \"to the group\""
        refute_peer_line --partial "(duplicate)"
        assert_peer_line "Received 3 of 3 datagrams"
        assert_peer_line --index -1 "Sample finished successfully"
    done
}

@test "multicast: a full member's join puts the group's MAC on the interface; leaving takes it off" {
    receivers 1 --iters 1
    local mac
    mac=$(printf '01:00:5e:%02x:%02x:%02x' "$(cut -d. -f2 <<<"$GROUP")" "$(cut -d. -f3 <<<"$GROUP")" "$(cut -d. -f4 <<<"$GROUP")")
    run -0 at_device ip maddr show
    assert_output --partial "$mac"
    assert_output --partial "inet  $GROUP"
    run -0 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 --iters 1
    wait_peer receiver1
    assert_equal "$peer_status" 0
    run -0 at_device ip maddr show # the receiver left: the kernel dropped the group
    refute_output --partial "$mac"
}

@test "multicast: no sender: the receiver times out within -t and says what to check" {
    run -1 timeout -k 5 60 "$RECEIVER" --group "$GROUP" -t 3
    assert_line --partial "receiver: step 6 failed: timed out after 3 s waiting for a datagram to group $GROUP"
    assert_line --partial "hint: is the sender running with the same --group, on the same network, after this receiver printed \"attached\"?"
}

@test "multicast: mckey's datagrams reach our receivers (not numbered: counted as they are)" {
    receivers 2
    run -0 timeout -k 5 60 "${MCKEY[@]}" -m "$GROUP" -b "$CM_ADDR" -s -C 3 -S 100
    assert_line "data transfers complete"
    local i
    for i in 1 2; do
        wait_peer "receiver$i"
        assert_equal "$peer_status" 0
        assert_peer_line --regexp "^Got a datagram of 100 bytes from QPN 0x[0-9a-f]{6}, not a numbered one$"
        assert_peer_line "Received 3 datagram(s), none numbered"
    done
}

@test "multicast: our sender's datagrams reach mckey's receiver" {
    start_peer mckey "${MCKEY[@]}" -m "$GROUP" -b "$CM_ADDR" -C 3 -S 100
    wait_line mckey "receiving data transfers"
    run -0 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 -s "to mckey"
    wait_peer mckey
    assert_equal "$peer_status" 0
    assert_peer_line "data transfers complete"
}

@test "multicast: the sender's own QP, attached too (--loopback), gets its datagrams back on Soft-RoCE when a receiver on its host has joined, and none when none has" {
    # The copy comes back into the device through the kernel's IP multicast loopback, which needs the
    # host to be a member of the group: a full member's join makes it one, a send-only join does not.
    receivers 1
    run -0 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 --loopback -s "and back?"
    assert_line --regexp "^ +QPN 0x[0-9a-f]{6}, state RTS; \(demonstration\) attached to the group too, a receive posted for each datagram$"
    assert_line "Our own QP got 3 of its 3 datagrams back"
    wait_peer receiver1
    assert_equal "$peer_status" 0
    assert_peer_line "Received 3 of 3 datagrams"
    run -0 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 --loopback -s "and back?"
    assert_line "Our own QP got 0 of its 3 datagrams back"
}

@test "multicast: --block-loopback: Soft-RoCE refuses IBV_QP_CREATE_BLOCK_SELF_MCAST_LB at step 4, with a hint" {
    run -1 timeout -k 5 60 "$SENDER" --group "$GROUP" -t 20 --block-loopback
    assert_line "sender: step 4 failed: ibv_create_qp_ex(UD, create_flags 0x2): Operation not supported (errno 95)"
    assert_line "hint: the device refuses these QP create flags (rxe takes none); create the QP without them"
}

@test "multicast: --group must be an IPv4 multicast address (exit 2, before any device is opened)" {
    run -2 --separate-stderr "$RECEIVER" --group 10.1.2.3
    assert_equal "$stderr" 'rdma_multicast_receive: --group: "10.1.2.3" is not an IPv4 multicast address
hint: a group is in 224.0.0.0/4; 239.0.0.0/8 is for local use'
}
