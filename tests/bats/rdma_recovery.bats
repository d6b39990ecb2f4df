#!/usr/bin/env bats
# rdma_recovery: a WRITE with a wrong rkey puts both RC QPs in the error state; the requester drains
# the flushed work, both sides go ERR -> RESET -> INIT -> RTR -> RTS with new PSNs agreed in a second
# round of descriptor files, and the WRITEs that did not complete are posted again. The faults: either
# side killed in the middle of the recovery, a requester whose responder never comes; each ends within
# its -t with an explained error. With RDMA CM (rdma_recovery_client and _server): a session that
# survives a server killed and restarted, a server that serves the next client after one dies.
# Run with run-bats --cm (the RDMA CM tests need the device on an interface with an address).

load test_helper/common

setup() {
    require_rdma_device
    REQUESTER=$(prog rdma_recovery_requester)
    RESPONDER=$(prog rdma_recovery_responder)
    CLIENT=$(prog rdma_recovery_client)
    SERVER=$(prog rdma_recovery_server)
    PORT=$((20000 + RANDOM % 20000))
}

# kill_peer NAME: SIGKILL the program started with start_peer NAME (its pid file holds `timeout`).
kill_peer() {
    kill_program KILL "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/$1.pid")")"
}

@test "recovery: WRITE #4 with a wrong rkey; #5 and #6 flushed; both QPs back through RESET; all six written" {
    run_pair "$RESPONDER" $(responder_paths) -t 30 -- "$REQUESTER" $(requester_paths) -t 30
    assert_success
    assert_line "WRITE #3: IBV_WC_SUCCESS (success)"
    assert_line "WRITE #4: IBV_WC_REM_ACCESS_ERR (remote access error)"
    assert_line "WRITE #5: IBV_WC_WR_FLUSH_ERR (Work Request Flushed Error)"
    assert_line "WRITE #6: IBV_WC_WR_FLUSH_ERR (Work Request Flushed Error)"
    assert_line --regexp '^        QP 0x[0-9a-f]{6} is in state ERR; the device.s async events: none$'
    assert_line "step 7: our QP is in the error state: take it ERR -> RESET -> INIT"
    assert_line --regexp '^step 5: post 3 RDMA WRITE\(s\) at once to 0x[0-9a-f]+, rkey 0x[0-9a-f]+$'
    assert_line "WRITE #6: IBV_WC_SUCCESS (success)"
    assert_line "Requester has written 6 WRITE(s), every one completed successfully"
    assert_line --index -1 "Sample finished successfully"
    grep -E 'QP 0x.* is in state ERR' <<<"$output" | sed 's/^ */# requester: /' >&3
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^        the goodbye.s receive: IBV_WC_WR_FLUSH_ERR; QP 0x[0-9a-f]{6} is in state ERR; the device.s async events: none$'
    grep 'the goodbye.s receive:' <<<"$peer_output" | sed 's/^ */# responder: /' >&3
    # Before the recovery: the three WRITEs before the bad one, nothing of #4 to #6.
    assert_equal "$(sed -n '/^Responder memory before the recovery:/,/^step/p' <<<"$peer_output")" 'Responder memory before the recovery:
  slot 1: "write #1"
  slot 2: "write #2"
  slot 3: "write #3"
step 7: take the QP ERR -> RESET -> INIT, and post the goodbye'"'"'s receive again'
    assert_equal "$(sed -n '/^Responder memory at the end:/,$p' <<<"$peer_output" | grep '^  slot')" '  slot 1: "write #1"
  slot 2: "write #2"
  slot 3: "write #3"
  slot 4: "write #4"
  slot 5: "write #5"
  slot 6: "write #6"'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "recovery: with --fail-at 0 nothing fails and nobody recovers" {
    run_pair "$RESPONDER" $(responder_paths) -t 30 -- "$REQUESTER" $(requester_paths) -t 30 --fail-at 0 --count 2
    assert_success
    assert_line "WRITE #2: IBV_WC_SUCCESS (success)"
    refute_line --partial "step 7:"
    assert_equal "$peer_status" 0
    refute_peer_line --partial "before the recovery"
    assert_peer_line '  slot 2: "write #2"'
}

@test "recovery: --try-err-to-rts: the device refuses ERR -> RTS, the way through RESET works" {
    run_pair "$RESPONDER" $(responder_paths) -t 30 -- "$REQUESTER" $(requester_paths) -t 30 --count 2 --fail-at 1 --try-err-to-rts
    assert_success
    assert_line --regexp '^        ibv_modify_qp\(ERR -> RTS\): '
    grep 'ERR -> RTS' <<<"$output" | sed 's/^ */# /' >&3
    assert_line "Requester has written 2 WRITE(s), every one completed successfully"
    assert_equal "$peer_status" 0
}

# kill_at VICTIM STEP: VICTIM (requester or responder, -t 30) stops itself at the start of its step
# STEP (RDMA_SAMPLES_STOP_AT_STEP) and is SIGKILLed there; the other side (-t 5) must end within 20 s
# of the kill. Its status and output are then in peer_status and peer_output.
kill_at() {
    local victim=$1 step=$2 survivor=requester start
    [ "$victim" = requester ] && survivor=responder
    RDMA_SAMPLES_STOP_AT_STEP=$step start_peer "$victim" "$(program "$victim")" $("${victim}_paths") -t 30
    start_peer "$survivor" "$(program "$survivor")" $("${survivor}_paths") -t 5
    wait_line "$victim" "^step $step:"
    kill_peer "$victim"
    start=$SECONDS
    wait_peer "$survivor"
    grep -A1 "failed:" <<<"$peer_output" | sed "s/^/# /" >&3
    [ $((SECONDS - start)) -le 20 ] || fail "the $survivor took $((SECONDS - start)) s after the kill"
}
program() { [ "$1" = requester ] && echo "$REQUESTER" || echo "$RESPONDER"; }

@test "recovery: the requester killed after its RESET; the responder, its QP in ERR, ends at its -t" {
    kill_at requester 8
    assert_equal "$peer_status" 1
    assert_peer_line --partial "responder: step 8 failed: timed out after 5 s waiting for "
    assert_peer_line "hint: the requester never sent its new descriptor: is it still running? (killed, or it gave up; its output says which)"
}

@test "recovery: the responder killed with its QP in ERR; the requester's new descriptor gets no answer within -t" {
    kill_at responder 7
    assert_equal "$peer_status" 1
    assert_peer_line "WRITE #4: IBV_WC_REM_ACCESS_ERR (remote access error)"
    assert_peer_line --partial "requester: step 8 failed: timed out after 5 s waiting for "
    assert_peer_line --partial "hint: the responder never answered our new descriptor: is it still running?"
}

@test "recovery: the responder killed once it has exported; whatever the WRITEs met, the recovery ends at -t" {
    # Stopped (SIGSTOP), the responder's QP still answers: Soft-RoCE's kernel does the work. Killed, its
    # QP is gone and nothing answers. Which of the two the WRITEs meet depends on how soon the kill comes.
    kill_at responder 6
    assert_equal "$peer_status" 1
    grep '^WRITE #1:' <<<"$peer_output" | sed 's/^/# /' >&3
    assert_peer_line --regexp "^WRITE #1: IBV_WC_(RETRY_EXC_ERR|SUCCESS) "
    assert_peer_line "WRITE #6: IBV_WC_WR_FLUSH_ERR (Work Request Flushed Error)"
    assert_peer_line --partial "requester: step 8 failed: timed out after 5 s waiting for "
}

@test "recovery: a responder that never comes: the requester ends at its -t, naming the file it waited for" {
    local start=$SECONDS
    run -1 --separate-stderr timeout 60 "$REQUESTER" $(requester_paths) -t 3
    assert_regex "$stderr" "requester: step 4 failed: timed out after 3 s waiting for .*responder.desc"
    [ $((SECONDS - start)) -le 20 ] || fail "the requester took $((SECONDS - start)) s"
}

@test "recovery: the flags: --fail-at past --count, --count over 16, a responder flag" {
    run -2 --separate-stderr "$REQUESTER" --count 3 --fail-at 5
    assert_equal "$stderr" "rdma_recovery_requester: --fail-at 5 is past --count 3
hint: choose a WRITE from 1 to --count, or 0 for none"
    run -2 --separate-stderr "$REQUESTER" --count 17
    assert_equal "$stderr" 'rdma_recovery_requester: --count: expected a number from 1 to 16, got "17"'
    run -2 --separate-stderr "$RESPONDER" --count 3
    assert_equal "$stderr" 'rdma_recovery_responder: unknown flag "--count" (see --help)'
}

# got_lines OUTPUT: the message numbers a server printed as got, one a line.
got_numbers() { sed -n 's/^client [0-9]*: got #\([0-9]*\): .*/\1/p' <<<"$1"; }

@test "recovery -cm: four messages, each acknowledged, one connection" {
    require_cm_addr
    start_peer server "$SERVER" -lp "$PORT" -t 30
    wait_listening server
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 4
    assert_success
    assert_line "message #4 acknowledged"
    assert_line "All 4 message(s) acknowledged, over 1 connection(s)"
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line 'client 1: got #4: "write #4"'
    assert_peer_line "client 1: 4 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
    assert_peer_line "Server memory at the end:"
    assert_peer_line '  slot 4: "write #4"'
    assert_peer_line --index -1 "Sample finished successfully"
}

@test "recovery -cm: the server killed midway and restarted; the client reconnects, learns the new rkey, resumes at the first message not acknowledged" {
    require_cm_addr
    start_peer server1 "$SERVER" -lp "$PORT" -t 30
    wait_listening server1
    start_peer client "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 6 --interval-ms 400
    wait_line server1 '^client 1: got #3:'
    kill_peer server1
    wait_peer server1
    local first=$peer_output
    start_peer server2 "$SERVER" -lp "$PORT" -t 30
    wait_peer client
    assert_equal "$peer_status" 0
    grep -E '^connection 1 broke|new: the server' <<<"$peer_output" | sed 's/^ */# /' >&3
    assert_peer_line --regexp '^connection 1 broke at message #[4-6]: (IBV_WC_RETRY_EXC_ERR|RDMA_CM_EVENT_DISCONNECTED)$'
    assert_peer_line --regexp 'rkey 0x[0-9a-f]+ \(new: the server registered its memory again\)$'
    assert_peer_line "All 6 message(s) acknowledged, over 2 connection(s)"
    local got1 got2 broke last
    broke=$(sed -n 's/^connection 1 broke at message #\([0-9]*\):.*/\1/p' <<<"$peer_output")
    wait_peer server2
    assert_equal "$peer_status" 0
    got1=$(got_numbers "$first" | tr '\n' ' ')
    got2=$(got_numbers "$peer_output" | tr '\n' ' ')
    echo "# first server got: $got1; second: $got2" >&3
    # The client resumed at the first message not acknowledged: the second server got that one to 6.
    assert_equal "$got2" "$(seq -s ' ' "$broke" 6) "
    # The first server printed 1 up to some #last, in order: at least #3 (the test waited for it), at
    # most #broke (printed, and its ACK lost with the server: it arrived twice). Those between #last
    # and #broke were acknowledged by its device and died with it before it polled (chapter 17: the
    # ACK is the device's, not the program's); the lesson guarantees no more than that.
    last=${got1% }
    last=${last##* }
    assert_equal "$got1" "$(seq -s ' ' 1 "$last") "
    [ "$last" -ge 3 ] && [ "$last" -le "$broke" ] || fail "the first server's last message is #$last; the connection broke at #$broke"
    [ "$last" -ge $((broke - 1)) ] || echo "# acknowledged by the first server's device, never printed: $(seq -s ' ' $((last + 1)) $((broke - 1)))" >&3
}

@test "recovery -cm: a client killed mid-session costs its own connection; the server serves the next one" {
    require_cm_addr
    start_peer server "$SERVER" -lp "$PORT" -t 30 --clients 2
    wait_listening server
    start_peer victim "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 16 --interval-ms 300
    wait_line server '^client 1: got #2:'
    kill_peer victim
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2
    assert_success
    assert_line "All 2 message(s) acknowledged, over 1 connection(s)"
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line --regexp '^client 1: [0-9]+ message\(s\); the client is gone \(RDMA_CM_EVENT_DISCONNECTED\)$'
    grep '^client 1: [0-9]* message' <<<"$peer_output" | sed 's/^/# /' >&3
    assert_peer_line "client 2: 2 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
}

@test "recovery -cm: a second client that asks while the first is served waits, and is served next" {
    require_cm_addr
    start_peer server "$SERVER" -lp "$PORT" -t 30 --clients 2
    wait_listening server
    start_peer first "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 4 --interval-ms 400
    wait_line server '^client 1: got #1:'
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2
    assert_success
    assert_line "All 2 message(s) acknowledged, over 1 connection(s)"
    wait_peer first
    assert_equal "$peer_status" 0
    wait_peer server
    assert_equal "$peer_status" 0
    assert_peer_line "client 1: 4 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
    assert_peer_line "client 2: 2 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
}

@test "recovery -cm: a client that gives up while it waits its turn is forgotten; the server serves the next one" {
    require_cm_addr
    start_peer server "$SERVER" -lp "$PORT" -t 30 --clients 2
    wait_listening server
    start_peer first "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 4 --interval-ms 1500
    wait_line server '^client 1: got #1:'
    # Its REQ waits unanswered; at its -t it gives up, and its CM sends the server's a REJ.
    run -1 --separate-stderr timeout 60 "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 2 --count 1
    assert_regex "$stderr" "client: step 3 failed: "
    wait_peer first
    assert_equal "$peer_status" 0
    # Its turn: the accept of its stale request fails, and the server waits for another client.
    wait_line server 'a client that waited its turn is gone'
    run "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 30 --count 2
    assert_success
    wait_peer server
    assert_equal "$peer_status" 0
    grep 'waited its turn' <<<"$peer_output" | sed 's/^ */# /' >&3
    assert_peer_line "client 1: 4 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
    assert_peer_line "client 2: 2 message(s); the client is gone (RDMA_CM_EVENT_DISCONNECTED)"
}

@test "recovery -cm: a server that never comes: the client ends at its -t, saying nobody listens" {
    require_cm_addr
    local start=$SECONDS
    run -1 --separate-stderr timeout 60 "$CLIENT" -sa "$CM_ADDR" -lp "$PORT" -t 3
    assert_regex "$stderr" "client: step 3 failed: "
    grep 'failed' <<<"$stderr" | sed 's/^/# /' >&3
    [ $((SECONDS - start)) -le 20 ] || fail "the client took $((SECONDS - start)) s"
}
