#!/usr/bin/env bats
# rdma_event_loop: one server thread, one epoll, many RDMA CM clients echoing messages; the clients that
# misbehave (idle, killed, one too many, a SEND too long, a SEND before the RTU, no RTU: the last two
# played by tests/rogue/rogue_loop_client) cost only their own connection. Run with
# run-bats --cm (RDMA CM needs the device on an Ethernet interface; see test_helper/common.bash).

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    SERVER=$(prog rdma_event_loop_server)
    CLIENT=$(prog rdma_event_loop_client)
    ROGUE=$BUILD/tests/rogue/rogue_loop_client
    [ -x "$ROGUE" ] || fail "no $ROGUE; build first (./lab build)"
    ROGUE=$(device_path "$ROGUE")
    PORT=$((20000 + RANDOM % 20000))
}

# server ARGS...: start the server in the background and wait until it listens.
server() {
    start_peer server "$SERVER" -lp "$PORT" "$@"
    wait_listening server
}

# client NAME ARGS...: start a client in the background.
client() {
    local name=$1
    shift
    start_peer "$name" "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" "$@"
}

# wait_server_line REGEX: wait (up to 60 s) until the server has printed a line matching REGEX.
wait_server_line() {
    for _ in {1..600}; do
        grep -Eq "$1" "$BATS_TEST_TMPDIR/server.out" && return 0
        nap 0.1
    done
    return 1
}

@test "rdma_event_loop: one client, three echoes, each checked byte for byte" {
    server --clients 1 -t 30
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 3 -s hello
    assert_success
    assert_line 'echo 1: "hello #1" (8 bytes), byte for byte as sent'
    assert_line 'echo 3: "hello #3" (8 bytes), byte for byte as sent'
    assert_line "All 3 echoes match what was sent"
    assert_line --partial "the server grants 4 credits"
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "^connection 0 established from $CM_ADDR port [0-9]+$"
    assert_peer_line "connection 0 closed: 3 message(s) echoed; the client disconnected"
    assert_peer_line "Served 1 client(s): 1 finished, 0 dropped; 3 message(s) echoed; at most 1 connected at once"
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_event_loop: 64 clients at once, 5 echoes each, on one server thread" {
    local i
    server --clients 64 --max-clients 64 -t 120
    for ((i = 0; i < 64; i++)); do
        client "client$i" -t 120 --count 5 --interval-ms 300 -s "from client $i"
    done
    for ((i = 0; i < 64; i++)); do
        wait_peer "client$i"
        [ "$peer_status" = 0 ] || fail "client $i exited with status $peer_status: $peer_output"
        assert_peer_line "echo 5: \"from client $i #5\" ($((${#i} + 15)) bytes), byte for byte as sent"
    done
    wait_peer server
    assert_equal "$peer_status" 0
    assert_equal "$(grep -c '^connection [0-9]* closed: 5 message(s) echoed; the client disconnected$' <<<"$peer_output")" 64
    assert_peer_line --regexp '^Served 64 client\(s\): 64 finished, 0 dropped; 320 message\(s\) echoed; at most [0-9]+ connected at once$'
    # Many were connected together (how many depends on how fast the VM starts 64 processes).
    local most
    most=$(sed -n 's/.*at most \([0-9]*\) connected at once/\1/p' <<<"$peer_output")
    echo "# at most $most connected at once" >&3
    [ "$most" -ge 2 ]
}

@test "rdma_event_loop: a client that connects and never sends is dropped after -t; the others are served" {
    server --clients 2 -t 3
    client idle -t 30 --count 1 --interval-ms 8000
    wait_server_line '^connection 0 established'
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2 -s busy
    assert_success
    wait_peer idle
    assert_equal "$peer_status" 1
    assert_peer_line --partial "client: step 5 failed: the server closed the connection (RDMA_CM_EVENT_DISCONNECTED) while we waited for nothing (a pause before message 1)"
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line "connection 0 closed: 0 message(s) echoed; dropped: no message for 3 s (-t)"
    assert_peer_line "connection 1 closed: 2 message(s) echoed; the client disconnected"
    assert_peer_line "Served 2 client(s): 1 finished, 1 dropped; 2 message(s) echoed; at most 2 connected at once"
}

@test "rdma_event_loop: a client killed mid-run is cleaned up; the server serves the rest" {
    server --clients 3 -t 30
    client victim -t 60 --count 1000 --interval-ms 200 -s doomed
    wait_server_line '^connection 0 established'
    for _ in {1..300}; do grep -q '^echo 2:' "$BATS_TEST_TMPDIR/victim.out" && break; nap 0.1; done
    # victim.pid is the `timeout` wrapper; kill the client itself, its only child.
    kill_program KILL "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/victim.pid")")"
    client second -t 30 --count 3 -s second
    client third -t 30 --count 3 -s third
    wait_peer second
    assert_equal "$peer_status" 0
    wait_peer third
    assert_equal "$peer_status" 0
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^connection 0 closed: [0-9]+ message\(s\) echoed; '
    grep '^connection 0 closed' <<<"$peer_output" | sed 's/^/# /' >&3
    assert_equal "$(grep -c '^connection [12] closed: 3 message(s) echoed; the client disconnected$' <<<"$peer_output")" 2
    assert_peer_line --regexp '^Served 3 client\(s\): '
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_event_loop: one client more than --max-clients is refused, and prints the server's reason" {
    server --clients 1 --max-clients 1 -t 30
    client first -t 30 --count 3 --interval-ms 1000 -s first
    wait_server_line '^connection 0 established'
    run -1 --separate-stderr "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 10 -s second
    assert_regex "$stderr" 'client: step 4 failed: waiting for the server to accept: got RDMA_CM_EVENT_REJECTED \(status [0-9]+\): the server refused the connection: "server full: 1 client\(s\) connected \(--max-clients 1\)"'
    assert_regex "$stderr" "hint: the server's reason is above"
    grep 'step 4 failed' <<<"$stderr" | sed 's/^/# /' >&3
    wait_peer first
    assert_equal "$peer_status" 0
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp "refused a client from $CM_ADDR port [0-9]+: server full: 1 client\(s\) connected \(--max-clients 1\)"
    assert_peer_line "Served 1 client(s): 1 finished, 0 dropped; 3 message(s) echoed; at most 1 connected at once"
}

@test "rdma_event_loop: a SEND longer than the server's receives fails that client's connection only" {
    server --clients 2 --message-size 16 -t 30
    run -1 --separate-stderr "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 1 -s "longer than sixteen bytes"
    assert_regex "$stderr" "client: step 5 failed: a SEND completed with IBV_WC_REM_(OP|INV_REQ)_ERR"
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2 -s short
    assert_success
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^connection 0 closed: 0 message\(s\) echoed; dropped: its receive completed with IBV_WC_LOC_(LEN|QP_OP)_ERR'
    assert_peer_line "connection 1 closed: 2 message(s) echoed; the client disconnected"
    assert_peer_line "Served 2 client(s): 1 finished, 1 dropped; 2 message(s) echoed; at most 1 connected at once"
}

# told_after OUTPUT: the seconds in the rogue's "told: EVENT after S s" line, as a whole number (rounded up).
told_after() {
    local s
    s=$(sed -n 's/^told: [A-Z_]* after \([0-9.]*\) s$/\1/p' <<<"$1")
    [ -n "$s" ] || fail "no 'told:' line: $1"
    echo "# told after $s s" >&3
    awk -v s="$s" 'BEGIN { printf "%d\n", s == int(s) ? s : int(s) + 1 }'
}

@test "rdma_event_loop: a client whose too-long SEND overtakes its RTU is told at its ESTABLISHED, not -t later" {
    # The server closes the connection before it is established; the DREQ can go only once the RTU
    # comes. Told within a few seconds, not at the server's -t (30 s), when it frees the entry.
    server --clients 2 --message-size 16 -t 30
    run "$ROGUE" --mode send-before-rtu -sa "$CM_ADDR" -lp "$PORT" -t 45 -s "longer than sixteen bytes"
    assert_success
    assert_line --regexp '^ *our SEND: IBV_WC_REM_(OP|INV_REQ)_ERR '
    assert_line --regexp '^told: RDMA_CM_EVENT_DISCONNECTED after [0-9.]+ s$'
    [ "$(told_after "$output")" -le 10 ]
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2 -s short
    assert_success
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^connection 0 established from .* after we closed it: disconnecting now$'
    assert_peer_line --regexp '^connection 0 closed: 0 message\(s\) echoed; dropped: its receive completed with IBV_WC_LOC_(LEN|QP_OP)_ERR'
    assert_peer_line "connection 1 closed: 2 message(s) echoed; the client disconnected"
    assert_peer_line "Served 2 client(s): 1 finished, 1 dropped; 2 message(s) echoed; at most 1 connected at once"
}

@test "rdma_event_loop: a client that never sends its RTU holds its entry for -t and 2 s more, not 2 x -t" {
    # Dropped at -t (6 s) with no DREQ possible; the close waits 2 s (close_wait()) for an RTU that never
    # comes, then frees the entry: destroying the cm_id sends a REJ, the client's REJECTED.
    server --clients 2 -t 6
    start_peer rogue "$ROGUE" --mode no-rtu -sa "$CM_ADDR" -lp "$PORT" -t 30
    wait_line rogue 'our RTU is not sent'
    # (an honest client meanwhile: served beside the one that holds its entry)
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2 -s short
    assert_success
    wait_peer rogue
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^told: RDMA_CM_EVENT_REJECTED after [0-9.]+ s$'
    local took
    took=$(told_after "$peer_output")
    [ "$took" -ge 6 ] && [ "$took" -le 10 ]
    wait_peer server
    assert_equal "$peer_status" 0
    refute_peer_line --regexp '^connection 0 established'
    assert_peer_line "connection 0 closed: 0 message(s) echoed; dropped: no message for 6 s (-t)"
    assert_peer_line "connection 1 closed: 2 message(s) echoed; the client disconnected"
}

@test "rdma_event_loop: a client that never answers the server's DREQ holds its entry 2 s more, not another -t" {
    # Dropped at -t (8 s): our DREQ tells it, but it sends no DREP; the close waits 2 s (close_wait()), not 8.
    server --clients 1 -t 8
    start_peer rogue "$ROGUE" --mode mute -sa "$CM_ADDR" -lp "$PORT" -t 30
    wait_line rogue '^told: RDMA_CM_EVENT_DISCONNECTED after [0-9.]+ s$'
    local told=$EPOCHREALTIME
    wait_peer server
    local freed
    freed=$(awk -v a="$told" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    echo "# the server ended ${freed} s after the client was told" >&3
    assert_equal "$peer_status" 0
    assert_peer_line "connection 0 closed: 0 message(s) echoed; dropped: no message for 8 s (-t)"
    awk -v f="$freed" 'BEGIN { exit !(f < 5) }' || fail "the entry was held ${freed} s after the DREQ (close_wait is 2 s)"
    kill_program TERM "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/rogue.pid")")"
    wait_peer rogue
}

@test "rdma_event_loop: SIGTERM closes the connected clients and ends the server cleanly" {
    server -t 30
    client slow -t 30 --count 100 --interval-ms 500 -s slow
    wait_server_line '^connection 0 established'
    kill_program TERM "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/server.pid")")"
    wait_peer slow
    assert_equal "$peer_status" 1
    wait_peer server
    # (in the VM, `vm exec` ends with 143 for a TERM it passed on, whatever the program's status: the
    # program's own last line says how it ended)
    served || assert_equal "$peer_status" 0
    assert_peer_line --partial "SIGINT or SIGTERM: refusing new clients, closing the 1 connected"
    assert_peer_line --regexp '^connection 0 closed: [0-9]+ message\(s\) echoed; dropped: the server is shutting down$'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "rdma_event_loop: RDMA CM only, and the flags say so in one line" {
    run -2 --separate-stderr "$SERVER" -ld /tmp/x
    assert_equal "$stderr" "rdma_event_loop_server: descriptor files make no sense for a server of many dynamic clients: rdma_event_loop connects with RDMA CM only
hint: leave -ld/-re out; the server listens on -lp, each client gives -sa ADDR"
    run -2 --separate-stderr "$CLIENT" -t 5
    assert_equal "$stderr" "rdma_event_loop_client: the client connects to the other side; give its address with -sa ADDR"
    run -2 --separate-stderr "$SERVER" -sa 10.0.0.1
    assert_equal "$stderr" "rdma_event_loop_server: the server listens and takes no -sa; give -sa 10.0.0.1 to the side that connects"
    run -2 --separate-stderr "$SERVER" --max-clients 0
    assert_equal "$stderr" 'rdma_event_loop_server: --max-clients: expected a number from 1 to 1024, got "0"'
    run -2 --separate-stderr "$CLIENT" -sa "$CM_ADDR" --count 0
    assert_equal "$stderr" 'rdma_event_loop_client: --count: expected a number from 1 to 100000, got "0"'
    run -2 --separate-stderr "$SERVER" --credits 17
    assert_equal "$stderr" 'rdma_event_loop_server: --credits: expected a number from 1 to 16, got "17"'
}
