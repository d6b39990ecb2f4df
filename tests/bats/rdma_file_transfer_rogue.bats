#!/usr/bin/env bats
# rdma_file_transfer against a peer that lies: tests/rogue/rogue_file_peer speaks protocol version 2 and
# tells one lie per run, as a sender to the real rdma_file_receiver or as a receiver to the real
# rdma_file_sender. Each test asserts the real program's error line, its exit status, that it ended in
# time, that peer text reached the terminal quoted (no raw ESC byte), and on the receiver's side that
# nothing is left under the final name and no temporary file either. RDMA CM only: run-bats --cm.
# The ring is 4 slots of 4096 bytes (the rogue's lies are sized for it); -t 3 wherever a wait may run out,
# except the waits for the other side to connect: the real receiver's (-t 10, against_receiver) and
# the rogue receiver's (-t 30, against_sender).

load test_helper/common

setup() {
    require_rdma_device
    require_cm_addr
    SENDER=$(prog rdma_file_sender)
    RECEIVER=$(prog rdma_file_receiver)
    ROGUE=$BUILD/tests/rogue/rogue_file_peer
    [ -x "$ROGUE" ] || fail "no $ROGUE; build first (./lab build)"
    ROGUE=$(device_path "$ROGUE")
    PORT=$((20000 + RANDOM % 20000))
    IN=$BATS_TEST_TMPDIR/in
    OUT=$BATS_TEST_TMPDIR/out
    mkdir -p "$IN" "$OUT"
    # shellcheck disable=SC2034 # (the bound of start_peer and cm_pair, test_helper/common.bash)
    PEER_TIMEOUT=60
}

# against_receiver LIE [RECEIVER_ARGS...]: the real receiver (ring 4 x 4096 into $OUT, -t 10) in the
# background, the rogue sender under `run`, both started at once: $output is the rogue's, $peer_output
# the receiver's; $took the seconds both took. The rogue connects again while nobody listens, as the
# real sender does, so the receiver's -t, which counts from its listen, never pays for the rogue's
# start. Started only once the receiver listened, it had not connected when that -t ran out: 3 s in a
# clean-clone run here, 10 s in CI (2026-11-30, under ASan, three suites on two cores; test 1 takes 19 s
# here beside the valgrind and stress suites, 3.3 s alone). Every lie here is caught at once; a test of
# a wait that must run out gives its own -t.
against_receiver() {
    local lie=$1 start=$SECONDS
    shift
    run_pair "$RECEIVER" -lp "$PORT" -t 10 -o "$OUT" --slots 4 --chunk 4096 "$@" -- \
        "$ROGUE" --role sender --lie "$lie" -sa "$CM_ADDR" -lp "$PORT" -t 10
    took=$((SECONDS - start))
    refute_sanitizer
}

# against_sender LIE [SENDER_ARGS...] FILE: the rogue receiver in the background, the real sender (-t 3)
# under `run` once the rogue listens: $output is the sender's, $peer_output the rogue's; $took the
# seconds both took. The sender's -t 3 bounds its connect too, so it starts only then; the rogue waits
# up to 30 s for it (the start under load, above).
against_sender() {
    local lie=$1 start=$SECONDS
    shift
    cm_pair "$ROGUE" --role receiver --lie "$lie" ${DIGEST:+--digest "$DIGEST"} -lp "$PORT" -t 30 -- \
        "$SENDER" -sa "$CM_ADDR" -lp "$PORT" -t 3 "$@"
    took=$((SECONDS - start))
    refute_sanitizer
}

# refute_sanitizer: neither side (the rogue included) printed an ASan, LeakSanitizer or UBSan report.
refute_sanitizer() {
    local o
    for o in "$output" "$peer_output"; do
        [[ $o != *Sanitizer* && $o != *"runtime error:"* ]] || fail "a sanitizer report: $o"
    done
}

# refute_escape TEXT: no raw ESC byte in TEXT (peer text must reach a terminal quoted).
refute_escape() {
    [[ $1 != *$'\e'* ]] || fail "a raw ESC byte reached the output: $(cat -v <<<"$1")"
}

# within SECONDS: the run took at most SECONDS. The tests give 30: both starts included, under ASan in
# a VM sharing two cores with two other suites (a wait for a start ran past 10 s in CI), and well under
# the 60 s at which pair_run stops a side. A wait that ran out shows in the error line, checked too.
within() {
    [ "$took" -le "$1" ] || fail "took $took s; the bound is $1 s"
}

# receiver_caught LINE: the real receiver failed with LINE (its stable start, matched as a prefix),
# ended in time, printed the sender's text quoted, and left nothing in $OUT (no file, no temporary).
receiver_caught() {
    assert_equal "$peer_status" 1
    assert_peer_line --partial "$1"
    assert_peer_line --index -1 "Sample finished with errors"
    refute_escape "$peer_output"
    assert_equal "$(ls -A "$OUT")" ""
    within 30
}

# sender_caught LINE: the real sender failed with LINE, in time, with the receiver's text quoted.
sender_caught() {
    assert_failure 1
    assert_line --partial "$1"
    assert_line --index -1 "Sample finished with errors"
    refute_escape "$output"
    within 30
}

# --- a rogue sender against rdma_file_receiver ---

@test "rogue sender: an offer with a bad magic, 100 bytes long, or an ID first is refused at step 3" {
    against_receiver bad-magic
    receiver_caught "receiver: step 3 failed: the sender sent a message that is not rdma_file_transfer's (456 bytes)"
    assert_peer_line "hint: is the peer rdma_file_sender / rdma_file_receiver, on the same -lp?"
    assert_line --partial 'the receiver refused: "the sender sent a message that is not rdma_file_transfer'"'"'s'
    PORT=$((PORT + 1)) against_receiver short-message
    receiver_caught "receiver: step 3 failed: the sender sent a 100-byte message; version 2 messages are 456"
    PORT=$((PORT + 2)) against_receiver id-first
    receiver_caught "receiver: step 3 failed: the sender sent a id message while we waited for the sender's offer"
}

@test "rogue sender: an offer whose text has no NUL is refused" {
    against_receiver offer-no-nul
    receiver_caught "receiver: step 3 failed: the sender sent a offer whose text has no NUL in its 384 bytes"
}

@test "rogue sender: names with an escape sequence, a leading . or -, or 240 bytes are refused, quoted" {
    against_receiver name-escape
    receiver_caught 'receiver: step 3 failed: the name "\x1b[31mred" contains a control character'
    refute_escape "$output"
    PORT=$((PORT + 1)) against_receiver name-dotfile
    receiver_caught 'receiver: step 3 failed: the name ".profile" starts with . (hidden files'
    PORT=$((PORT + 2)) against_receiver name-dash
    receiver_caught 'receiver: step 3 failed: the name "-rf" starts with - (hidden files'
    PORT=$((PORT + 3)) against_receiver name-long
    receiver_caught 'receiver: step 3 failed: the name "nnnnnnnnnn' # (quoted, cut to a few dozen bytes)
    assert_peer_line --partial "is 240 bytes; at most 238 fit (NAME_MAX 255, less 17 for the temporary name)"
}

@test "rogue sender: names with a bidirectional override, a C1 control or bytes that are not UTF-8 are refused, quoted" {
    against_receiver name-bidi
    receiver_caught 'receiver: step 3 failed: the name "invoice\xe2\x80\xaetxt.exe" contains an invisible format character (U+202E: '
    [[ $peer_output != *$'\xe2\x80\xae'* ]] || fail "the override reached the output raw"
    PORT=$((PORT + 1)) against_receiver name-c1
    receiver_caught 'receiver: step 3 failed: the name "a\xc2\x9b31mred" contains a control character'
    [[ $peer_output != *$'\xc2\x9b'* ]] || fail "the C1 control reached the output raw"
    PORT=$((PORT + 2)) against_receiver name-not-utf8
    receiver_caught 'receiver: step 3 failed: the name "a\x9b31mred" is not UTF-8 (byte 1)'
}

@test "rogue sender: an offer of 2^62 bytes is refused at step 3, beyond the free space or --max-size" {
    against_receiver offer-huge
    receiver_caught "receiver: step 3 failed: the offer is 4611686018427387904 bytes; \"$OUT\" has "
    assert_peer_line --partial " bytes free"
    assert_peer_line "hint: free space on the receiver's disk (df $OUT) or choose another -o"
    PORT=$((PORT + 1)) against_receiver offer-huge --max-size 1000000
    receiver_caught "receiver: step 3 failed: the offer is 4611686018427387904 bytes; --max-size is 1000000"
    assert_peer_line "hint: send a smaller file, or raise the receiver's --max-size"
}

# signal_midway SIGNAL: the real receiver writing into $OUT, the rogue sender stalled after the offer; once
# the receiver holds its temporary file, SIGNAL to it. $OUT is on 9p here (the VM's view of this
# machine's folder), which has no O_TMPFILE: the temporary file has a name, ".rogue.bin.N.part".
signal_midway() {
    start_peer receiver "$RECEIVER" -lp "$PORT" -t 30 -o "$OUT" --slots 4 --chunk 4096
    wait_listening receiver
    start_peer rogue "$ROGUE" --role sender --lie stall-after-offer -sa "$CM_ADDR" -lp "$PORT" -t 30
    wait_line receiver "^step 4:"
    [[ $(ls -A "$OUT") == .rogue.bin.*.part ]] || fail "expected a named temporary file in $OUT: $(ls -A "$OUT")"
    kill_program "$1" "$(pgrep -P "$(cat "$BATS_TEST_TMPDIR/receiver.pid")")"
    wait_peer receiver
    assert_equal "$(ls -A "$OUT")" ""
    wait_peer rogue
}

@test "rogue sender: a receiver ended by SIGTERM, SIGINT or SIGHUP leaves no temporary file behind" {
    signal_midway TERM
    PORT=$((PORT + 1)) signal_midway INT
    PORT=$((PORT + 2)) signal_midway HUP
}

@test "rogue sender: a zero-length WRITE with immediate is refused" {
    against_receiver zero-length-write
    receiver_caught "receiver: step 4 failed: a WRITE of 0 bytes into slot 0 after 0 of 20580 bytes; expected 4096 bytes into one of 4 slots"
}

@test "rogue sender: an immediate naming slot 4 of a 4-slot ring is refused" {
    against_receiver slot-out-of-range
    receiver_caught "receiver: step 4 failed: a WRITE of 4096 bytes into slot 4 after 0 of 20580 bytes; expected 4096 bytes into one of 4 slots"
}

@test "rogue sender: a chunk longer than the slot is refused" {
    against_receiver chunk-too-long
    receiver_caught "receiver: step 4 failed: a WRITE of 4097 bytes into slot 0 after 0 of 5000 bytes; expected 4096 bytes into one of 4 slots"
}

@test "rogue sender: a flood of zero-length WRITEs with immediate after the offered length is refused" {
    against_receiver chunks-after-end
    receiver_caught "receiver: step 4 failed: a WRITE of 0 bytes into slot 0 after 20580 of 20580 bytes; expected 0 bytes into one of 4 slots (no more chunks)"
}

@test "rogue sender: \"done\" after half the bytes is refused" {
    against_receiver done-at-half
    receiver_caught 'receiver: step 4 failed: "done" after 12288 bytes (it says 20580); the offer said 20580'
}

@test "rogue sender: \"done\" with a wrong digest: nothing is kept" {
    against_receiver done-wrong-digest
    local digest
    digest=$(grep -o 'sha256 [0-9a-f]\{64\}' <<<"$output" | head -n 1 | cut -d' ' -f2)
    receiver_caught "receiver: step 5 failed: the data's SHA-256 is $digest, the sender announced "
    assert_peer_line "hint: the data was damaged on the way, or the file changed while it was sent; nothing was kept"
}

@test "rogue sender: a slot rewritten while the receiver reads it: a kept file is always the digest's" {
    against_receiver rewrite-slot
    local offered
    offered=$(grep -o 'sha256 [0-9a-f]\{64\}' <<<"$output" | head -n 1 | cut -d' ' -f2)
    [ -n "$offered" ] || fail "the rogue printed no digest"
    if [ -e "$OUT/rogue.bin" ]; then
        # kept: the bytes on disk, the digest the receiver printed and the offered digest are one
        assert_equal "$(sha256sum <"$OUT/rogue.bin" | cut -d' ' -f1)" "$offered"
        assert_peer_line "$offered  $OUT/rogue.bin"
        assert_equal "$(ls -A "$OUT")" rogue.bin
    else
        assert_equal "$peer_status" 1
        assert_peer_line --partial "receiver: step 5 failed: the data's SHA-256 is "
        assert_equal "$(ls -A "$OUT")" ""
    fi
    within 30
}

@test "rogue sender: a SEND with immediate (a fake credit) is refused" {
    against_receiver fake-credit
    receiver_caught "receiver: step 4 failed: the sender sent a SEND with immediate "
    assert_peer_line --partial "; it sends chunks and messages only"
}

@test "rogue sender: chunks that ignore the credits, with no receive posted for them: the receiver names the sender" {
    against_receiver ignore-credits
    receiver_caught "receiver: step 4 failed: the sender has not received our last 8 SENDs (credits and messages): it posts no receives for them, or sends chunks without waiting for their credits"
    assert_peer_line "hint: the sender does not follow the protocol (rdma_file_transfer version 2)"
}

@test "rogue sender: a stall after the offer ends the receiver within -t" {
    # -t 5: short enough to wait out; the rogue, started with the receiver, connects as it listens
    against_receiver stall-after-offer -t 5
    receiver_caught "receiver: step 4 failed: timed out after 5 s waiting for the next chunk"
}

@test "rogue sender: a trickle (a chunk every 2 s) ends the receiver at --deadline" {
    # (the helper's -t 10: a chunk every 2 s, and under load a wait of 3 s for one could run out first;
    # here only --deadline may end the transfer)
    against_receiver trickle --deadline 5
    receiver_caught "receiver: step 4 failed: the whole transfer took longer than --deadline 5 s; we were waiting for the next chunk"
}

@test "rogue sender: a WRITE after \"done\" finds the ring deregistered (IBV_WC_REM_ACCESS_ERR)" {
    against_receiver write-after-done
    assert_line 'our WRITE after "done" completed with IBV_WC_REM_ACCESS_ERR'
    # the file was verified and kept before the WRITE came: what fails after it is a warning (exit 3)
    assert_peer_line "$(sha256sum "$OUT/rogue.bin")"
    assert_equal "$(ls -A "$OUT")" rogue.bin
    assert_equal "$peer_status" 3
    assert_peer_line "receiver: step 6: warning: our QP went to the error state with no error of our own and no event from the device: the sender's request broke it, an RDMA WRITE outside the memory we granted, with a wrong rkey, or after we deregistered it"
    assert_peer_line "done, and it stands: the file was verified and kept as $OUT/rogue.bin"
    assert_peer_line --index -1 "Sample finished with a warning"
    within 30
}

# --- a rogue receiver against rdma_file_sender ---

@test "rogue receiver: rings of 0 slots, of 0-byte chunks, of 2^31-byte chunks are refused at step 4" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender zero-slots "$IN/f"
    sender_caught "sender: step 4 failed: the receiver offers a ring of 0 slots of 4096 bytes"
    PORT=$((PORT + 1)) against_sender zero-chunk "$IN/f"
    sender_caught "sender: step 4 failed: the receiver offers a ring of 4 slots of 0 bytes"
    PORT=$((PORT + 2)) against_sender chunk-2g "$IN/f"
    sender_caught "sender: step 4 failed: the receiver offers a ring of 4 x 2147483648 bytes; we accept chunks of at most 1073741824 and rings of at most 1073741824 bytes"
}

@test "rogue receiver: a ring of 2^40 bytes is refused at once, without allocating it" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender ring-1t "$IN/f"
    # (at once: step 4 checks the ring against these limits before it allocates anything)
    sender_caught "sender: step 4 failed: the receiver offers a ring of 1048576 x 1048576 bytes; we accept chunks of at most"
}

@test "rogue receiver: a credit before any WRITE, a credit twice, a credit for slot 99 are refused" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender credit-before-write "$IN/f"
    sender_caught "the receiver returned slot 0 (0 bytes), which is not one we wrote and it still holds"
    PORT=$((PORT + 1)) against_sender credit-twice "$IN/f"
    sender_caught "the receiver returned slot 0 (0 bytes), which is not one we wrote and it still holds"
    PORT=$((PORT + 2)) against_sender credit-slot-99 "$IN/f"
    sender_caught "the receiver returned slot 99 (0 bytes), which is not one we wrote and it still holds"
}

@test "rogue receiver: a verdict before \"done\" (even with the right digest) is not trusted" {
    head -c 10000 /dev/urandom >"$IN/f"
    DIGEST=$(sha256sum <"$IN/f" | cut -d' ' -f1) against_sender verdict-before-done "$IN/f"
    sender_caught "sender: step "
    assert_line --regexp '^sender: step [0-9]+ failed: .*verdict'
    refute_line --partial "Receiver's digest matches ours"
}

@test "rogue receiver: a verdict of flags 1 with a wrong digest is not trusted" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender verdict-wrong-digest "$IN/f"
    sender_caught "sender: step 6 failed: the receiver says the digests match, but it computed "
    assert_line --partial ": not trusted"
    refute_line --partial "Receiver's digest matches ours"
}

@test "rogue receiver: a verdict with flags 7 is refused" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender verdict-flags-7 "$IN/f"
    sender_caught "sender: step 6 failed: the receiver's verdict has flags 7; expected 0 or 1"
    refute_line --partial "Receiver's digest matches ours"
}

@test "rogue receiver: a refusal with escape sequences is printed quoted" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender refusal-escape "$IN/f"
    sender_caught 'sender: step 4 failed: the receiver refused: "go away \x1b[2J\x1b[31mred\x1b]0;owned\x07"'
    assert_line 'hint: the receiver says: "hint \x1b[2J\x1b[31mred\x1b]0;owned\x07"'
}

@test "rogue receiver: a key with escape sequences is printed quoted" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender key-escape "$IN/f"
    assert_success
    assert_line 'Key from receiver: "key \x1b[2J\x1b[31mred\x1b]0;owned\x07"'
    refute_escape "$output"
    within 30
}

@test "rogue receiver: a key whose text has no NUL is refused" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender key-no-nul "$IN/f"
    sender_caught "sender: step 7 failed: the receiver sent a key whose text has no NUL in its 384 bytes"
}

@test "rogue receiver: a second key right after the first is reported; the delivery stands (exit 3)" {
    head -c 10000 /dev/urandom >"$IN/f"
    RUN_FLAGS=-3 against_sender second-key "$IN/f"
    assert_line "sender: step 8: warning: the receiver sent a key message after its answer: the answer printed above may be that message's text (every receive lands in one buffer)"
    assert_line "done, and it stands: the receiver verified the file, and its answer came"
    assert_line --index -1 "Sample finished with a warning"
}

@test "rogue receiver: an RDMA WRITE into the sender finds a QP that grants nothing, and the sender names the receiver" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender write-into-sender "$IN/f"
    # the sender's QP refuses remote writes (grant_only(qp, 0)), before any rkey is looked at
    assert_peer_line "our WRITE into the sender completed with IBV_WC_REM_INV_REQ_ERR"
    sender_caught "our QP went to the error state with no error of our own and no event from the device: the receiver's request broke it"
}

@test "rogue receiver: a second ring message is refused" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender second-ring "$IN/f"
    sender_caught "sender: step "
    assert_line --regexp '^sender: step [0-9]+ failed: the receiver sent a '
}

@test "rogue receiver: no ring at all ends the sender within -t" {
    head -c 10000 /dev/urandom >"$IN/f"
    against_sender stall-before-ring "$IN/f"
    sender_caught "sender: step 4 failed: timed out after 3 s waiting for the receiver's ring"
}

@test "rogue receiver: slow credits (2 s each) end the sender at --deadline" {
    head -c $((20 * 4096)) /dev/urandom >"$IN/f"
    # -t 10 (after the helper's -t 3): each credit is 2 s late, and under load a wait of 3 s for it can run
    # out first; here only --deadline may end the transfer
    against_sender slow-credits -t 10 --deadline 5 "$IN/f"
    sender_caught "sender: step 5 failed: the whole transfer took longer than --deadline 5 s; we were waiting for the credit of slot "
}
