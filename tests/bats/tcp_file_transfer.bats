#!/usr/bin/env bats
# The TCP twin of rdma_file_transfer (rdma_file_transfer/tcp): one file over a TCP socket, verified with
# SHA-256; sizes at the chunk's edges, each fault with its error and hint, and a peer that lies
# (test_helper/tcp_file_peer.py). No RDMA device: everything runs on this machine over 127.0.0.1
# (run-bats --host). No test asserts a wall-clock limit.

load test_helper/common

CHUNK=4096

setup() {
    SENDER=$(prog tcp_file_sender)
    RECEIVER=$(prog tcp_file_receiver)
    PEER="$BATS_TEST_DIRNAME/test_helper/tcp_file_peer.py"
    PORT=$(free_port)
    IN=$BATS_TEST_TMPDIR/in
    OUT=$BATS_TEST_TMPDIR/out
    mkdir -p "$IN" "$OUT"
    # shellcheck disable=SC2034 # (the bound of start_peer and cm_pair, test_helper/common.bash)
    PEER_TIMEOUT=60
}

# free_port: a TCP port nobody listens on now (the kernel's choice of an ephemeral one).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# transfer [RECEIVER_ARGS...] -- [SENDER_ARGS...] FILE: the receiver (chunks of CHUNK into $OUT unless the
# args say otherwise) in the background, the sender under `run`.
transfer() {
    local rargs=()
    while [ "$1" != -- ]; do
        rargs+=("$1")
        shift
    done
    shift
    cm_pair "$RECEIVER" -lp "$PORT" -t 10 -o "$OUT" --chunk "$CHUNK" "${rargs[@]}" -- \
        "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 10 "$@"
}

# random_file NAME BYTES: a file of random bytes in $IN.
random_file() { head -c "$2" /dev/urandom >"$IN/$1"; }

# assert_copied NAME: both sides succeeded, the copy is byte for byte the original, and each side printed
# the digest that sha256sum computes for its own file.
assert_copied() {
    assert_success
    assert_equal "$peer_status" 0
    cmp "$IN/$1" "$OUT/$1"
    assert_line "$(sha256sum "$IN/$1")"
    assert_peer_line "$(sha256sum "$OUT/$1")"
    assert_line --partial "Receiver's digest matches ours: "
    assert_line --index -1 "Sample finished successfully"
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A "$OUT")" "$1" # no temporary file left beside it
}

# start_program NAME CMD...: start_peer without its `timeout` wrapper, so that the pid in NAME.pid is the
# program's own, for a test that kills it (each program ends within its -t anyway).
start_program() {
    local name=$1
    shift
    "$@" >"$BATS_TEST_TMPDIR/$name.out" 2>&1 3>&- &
    echo $! >"$BATS_TEST_TMPDIR/$name.pid"
}

# against_receiver LIE: the real receiver in the background, the lying sender under `run`. (-t 10: the
# receiver's wait for the liar runs from the moment it listens, and the liar, a Python program, starts
# only once the test has seen that; every lie is caught at once, no wait has to run out.)
against_receiver() {
    start_peer receiver "$RECEIVER" -lp "$PORT" -t 10 -o "$OUT" --chunk "$CHUNK"
    wait_listening receiver
    run timeout 60 "$PEER" sender "$PORT" "$1"
    wait_peer receiver
    assert_equal "$peer_status" 1
    assert_equal "$(ls -A "$OUT")" "" # nothing kept, no temporary file
}

# against_sender LIE: the lying receiver in the background, the real sender under `run` (-t 3).
against_sender() {
    random_file f 10000
    start_peer liar "$PEER" receiver "$PORT" "$1"
    wait_listening liar
    run -1 --separate-stderr timeout 60 "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 3 "$IN/f"
    wait_peer liar
}

@test "tcp_file_transfer: the same file arrives, and both sides print sha256sum's digest of it" {
    seq 1 100000 >"$IN/numbers.txt"
    transfer -- "$IN/numbers.txt"
    assert_copied numbers.txt
    assert_line --partial "chunks of $CHUNK bytes; a buffer of $CHUNK bytes"
    assert_peer_line --partial "offer: \"numbers.txt\", 588895 bytes; writing "
}

@test "tcp_file_transfer: sizes 0, 1, chunk-1, chunk, chunk+1 and 10 chunks + 1 arrive intact" {
    local size
    for size in 0 1 $((CHUNK - 1)) $CHUNK $((CHUNK + 1)) $((10 * CHUNK + 1)); do
        rm -rf "${OUT:?}"/*
        random_file "f$size" "$size"
        transfer -- "$IN/f$size"
        assert_copied "f$size"
    done
}

@test "tcp_file_transfer: an empty file arrives as an empty file, with the empty file's digest" {
    : >"$IN/empty"
    transfer -- "$IN/empty"
    assert_copied empty
    assert_line "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  $IN/empty"
    assert [ ! -s "$OUT/empty" ]
}

@test "tcp_file_transfer: with the default chunk, a file of several MiB; -o names the file itself" {
    random_file big $((3 * 1024 * 1024 + 5))
    cm_pair "$RECEIVER" -lp "$PORT" -t 10 -o "$OUT/copy" -- "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 10 "$IN/big"
    assert_success
    assert_equal "$peer_status" 0
    cmp "$IN/big" "$OUT/copy"
    assert_line --partial "chunks of 1048576 bytes; a buffer of 1048576 bytes"
    assert_peer_line "$(sha256sum "$OUT/copy")"
}

@test "tcp_file_transfer: a corrupted chunk (test hook) fails the digest; nothing is kept" {
    random_file f $((5 * CHUNK))
    RDMA_SAMPLES_TEST_FILE_FAULT=corrupt RUN_FLAGS=-1 transfer -- "$IN/f"
    assert_line --partial "sender: step 6 failed: the receiver computed "
    assert_line --partial ": the data was damaged"
    assert_line "hint: nothing was kept on the receiver; send the file again"
    assert_line "$(sha256sum "$IN/f")" # the sender's digest is the file's: the damage came after hashing
    assert_line --index -1 "Sample finished with errors"
    assert_equal "$peer_status" 1
    assert_peer_line --partial "receiver: step 5 failed: the data's SHA-256 is "
    assert_peer_line "hint: the data was damaged on the way, or the file changed while it was sent; nothing was kept"
    assert_peer_line --index -1 "Sample finished with errors"
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: a sender with nobody listening gives up within -t and asks whether the receiver runs" {
    random_file f 100
    run -1 --separate-stderr "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 2 "$IN/f"
    assert_line "        nobody listens on 127.0.0.1 port $PORT yet; trying again for up to 2 s"
    assert_equal "${stderr_lines[0]}" "sender: step 2 failed: connect(127.0.0.1 port $PORT): nobody listens there (ECONNREFUSED)"
    assert_equal "${stderr_lines[1]}" "hint: is the receiver running on 127.0.0.1 port $PORT? start it first (tcp_file_receiver -o DIR), with the same -lp"
    assert_line --index -1 "Sample finished with errors"
}

@test "tcp_file_transfer: a receiver whose sender never comes times out after -t" {
    run -1 --separate-stderr "$RECEIVER" -lp "$PORT" -t 2 -o "$OUT"
    assert_line "        listening on port $PORT; waiting up to 2 s for the sender"
    assert_equal "${stderr_lines[0]}" "receiver: step 2 failed: timed out after 2 s waiting for the sender to connect"
    assert_equal "${stderr_lines[1]}" "hint: start tcp_file_sender -sa ADDR FILE"
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: bad flags exit 2 with one line; --help lists the TCP flags and no RDMA ones" {
    local args
    while IFS='|' read -r program args expected; do
        # shellcheck disable=SC2086 # (args split on purpose)
        run -2 --separate-stderr "$(prog "$program")" $args
        assert_equal "${stderr_lines[0]}" "$expected" # one line (and a hint, where there is one)
        assert_equal "$output" ""
    done <<EOF
tcp_file_receiver|-lp 1|tcp_file_receiver: -o is required: the directory (or file path) to store the received file in
tcp_file_receiver|-o x --chunk 0|tcp_file_receiver: --chunk: expected a number from 1 to 1073741824, got "0"
tcp_file_receiver|-o x -lp 70000|tcp_file_receiver: -lp: expected a number from 1 to 65535, got "70000"
tcp_file_receiver|-o x -d rxe0|tcp_file_receiver: unknown flag "-d" (see --help)
tcp_file_receiver|-o x --slots 4|tcp_file_receiver: unknown flag "--slots" (see --help)
tcp_file_sender|-sa 127.0.0.1|tcp_file_sender: missing FILE (see --help)
tcp_file_sender|-sa localhost f|tcp_file_sender: -sa: expected an IPv4 or IPv6 address, got "localhost"
tcp_file_sender|-sa 127.0.0.1 --deadline 0 f|tcp_file_sender: --deadline: expected a number from 1 to 604800, got "0"
tcp_file_sender|-sa 127.0.0.1 -t|tcp_file_sender: -t: missing value
EOF
    run -2 --separate-stderr "$SENDER" "$IN/f"
    assert_equal "$stderr" "tcp_file_sender: the sender connects to the receiver; give its address with -sa ADDR"
    run -0 "$SENDER" --help
    assert_line --partial "Usage: tcp_file_sender [flags] FILE"
    assert_output --partial "-lp, --listen-port PORT"
    assert_output --partial "-sa, --server-addr ADDR"
    assert_output --partial "--deadline SECONDS"
    refute_output --partial "--device"
    run -0 "$RECEIVER" --help
    assert_output --partial "-o, --output PATH|DIR"
    assert_output --partial "--chunk BYTES"
    assert_output --partial "(default: 1048576)"
    refute_output --partial "--gid-index"
}

@test "tcp_file_transfer: an existing destination is refused without --force and replaced with it" {
    random_file f 1000
    echo old >"$OUT/f"
    RUN_FLAGS=-1 transfer -- "$IN/f"
    assert_line "sender: step 4 failed: the receiver refused: \"\\\"$OUT/f\\\" exists\""
    assert_line 'hint: the receiver says: "pass --force to replace it, or choose another -o"'
    assert_peer_line "receiver: step 3 failed: \"$OUT/f\" exists"
    assert_equal "$(cat "$OUT/f")" old
    PORT=$(free_port) transfer --force -- "$IN/f"
    assert_copied f
}

@test "tcp_file_transfer: a name that is a path or hidden is refused at step 3" {
    random_file f 10
    RUN_FLAGS=-1 transfer -- --name ../evil "$IN/f"
    assert_line --partial "sender: step 4 failed: the receiver refused: \"the name \\\"../evil\\\" starts with ."
    assert_peer_line --partial "receiver: step 3 failed: the name \"../evil\" starts with ."
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: --max-size refuses a bigger offer before a byte is written" {
    random_file f 5000
    RUN_FLAGS=-1 transfer --max-size 4999 -- "$IN/f"
    assert_line "sender: step 4 failed: the receiver refused: \"the offer is 5000 bytes; --max-size is 4999\""
    assert_peer_line "receiver: step 3 failed: the offer is 5000 bytes; --max-size is 4999"
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: a sender killed midway: the receiver says how far it got and keeps nothing" {
    random_file f $((40 * CHUNK)) # 12 s at 300 ms a chunk: killed long before the end
    start_peer receiver "$RECEIVER" -lp "$PORT" -t 10 -o "$OUT" --chunk "$CHUNK"
    wait_listening receiver
    RDMA_SAMPLES_TEST_FILE_FAULT=pause=300 start_program sender "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 10 "$IN/f"
    wait_line sender "^step 5:"
    kill -KILL "$(cat "$BATS_TEST_TMPDIR/sender.pid")"
    wait_peer receiver
    assert_equal "$peer_status" 1
    assert_peer_line --regexp "^receiver: step 4 failed: the sender closed the connection (after [0-9]+ of the $((40 * CHUNK)) bytes of the file|while we waited for the file)$"
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: a receiver killed midway: the sender ends with an error at step 5" {
    random_file f $((200 * CHUNK))
    start_program receiver "$RECEIVER" -lp "$PORT" -t 5 -o "$OUT" --chunk "$CHUNK"
    wait_listening receiver
    ( # once the sender is at step 5, kill the receiver
        wait_line sender "^step 5:"
        kill -KILL "$(cat "$BATS_TEST_TMPDIR/receiver.pid")"
    ) 3>&- &
    RDMA_SAMPLES_TEST_FILE_FAULT=pause=50 start_peer sender "$SENDER" -sa 127.0.0.1 -lp "$PORT" -t 5 "$IN/f"
    wait_peer sender
    assert_equal "$peer_status" 1
    assert_peer_line --regexp "^sender: step 5 failed: .*(the receiver closed the connection|Connection reset by peer|Broken pipe)"
}

@test "tcp_file_transfer: --deadline bounds a transfer that keeps going" {
    random_file f $((100 * CHUNK))
    RDMA_SAMPLES_TEST_FILE_FAULT=pause=100 RUN_FLAGS=-1 transfer --deadline 1 -- "$IN/f"
    assert_equal "$peer_status" 1
    assert_peer_line --regexp "^receiver: step 4 failed: the whole transfer took longer than --deadline 1 s; we were waiting for "
    assert_line --regexp "^sender: step 5 failed: the receiver refused: .*the whole transfer took longer than --deadline 1 s"
    assert_equal "$(ls -A "$OUT")" ""
}

@test "tcp_file_transfer: a sender that lies is refused with the lie named; nothing is kept" {
    local lie expected
    while IFS='|' read -r lie expected; do
        rm -rf "${OUT:?}"/*
        PORT=$(free_port)
        against_receiver "$lie"
        assert_peer_line --partial "$expected"
        refute_peer_output --partial $'\e' # peer text reaches the terminal quoted
    done <<'EOF'
not-ours|receiver: step 3 failed: the sender sent 0x20544547 where a message starts; not tcp_file_transfer's
version|receiver: step 3 failed: the sender speaks protocol version 7; this program speaks version 1
no-nul|receiver: step 3 failed: the sender sent a offer whose text has no NUL in its 384 bytes
short|receiver: step 4 failed: the sender closed the connection after 5 of the 10 bytes of the file
done-length|receiver: step 4 failed: "done" says 4 bytes; the offer said 3
out-of-turn|receiver: step 3 failed: the sender sent a verdict message while we waited for the sender's offer
ansi-refusal|receiver: step 3 failed: the sender refused: "\x1b[31mred\x1b[0m"
EOF
}

@test "tcp_file_transfer: a receiver that lies is caught by the sender" {
    local lie expected
    while IFS='|' read -r lie expected; do
        PORT=$(free_port)
        against_sender "$lie"
        assert_equal "${stderr_lines[0]}" "$expected"
        assert_line --index -1 "Sample finished with errors"
    done <<'EOF'
chunk-zero|sender: step 4 failed: the receiver asks for chunks of 0 bytes; we send 1 to 1073741824
chunk-huge|sender: step 4 failed: the receiver asks for chunks of 1073741825 bytes; we send 1 to 1073741824
verdict-early|sender: step 4 failed: the receiver sent a verdict message while we waited for the receiver's answer to our offer
EOF
    PORT=$(free_port)
    against_sender false-match
    assert_regex "${stderr_lines[0]}" "^sender: step 6 failed: the receiver says the digests match, but it computed 0101[0-9a-f]+, not our [0-9a-f]{64}: not trusted$"
}
