#!/usr/bin/env bats
# rdma_file_transfer: one file, sent in chunks into the receiver's ring and verified with SHA-256; every
# size at the ring's edges, and each fault with its error and hint. RDMA CM only: run with run-bats --cm.
# Chunks are small here (4 KiB) so that the edges are cheap and a file takes many trips round the ring.

load test_helper/common

CHUNK=4096
SLOTS=4

setup() {
    require_rdma_device
    require_cm_addr
    SENDER=$(prog rdma_file_sender)
    RECEIVER=$(prog rdma_file_receiver)
    PORT=$((20000 + RANDOM % 20000))
    IN=$BATS_TEST_TMPDIR/in
    OUT=$BATS_TEST_TMPDIR/out
    mkdir -p "$IN" "$OUT"
}

# transfer [RECEIVER_ARGS...] -- [SENDER_ARGS...] FILE: the receiver (ring of SLOTS x CHUNK, into $OUT
# unless the args say otherwise) in the background, the sender under `run`.
transfer() {
    local rargs=()
    while [ "$1" != -- ]; do
        rargs+=("$1")
        shift
    done
    shift
    cm_pair "$RECEIVER" -lp "$PORT" -t 20 -o "$OUT" --slots "$SLOTS" --chunk "$CHUNK" "${rargs[@]}" -- \
        "$SENDER" -sa "$CM_ADDR" -lp "$PORT" -t 20 "$@"
}

# random_file NAME BYTES: a file of random bytes in $IN.
random_file() { head -c "$2" /dev/urandom >"$IN/$1"; }

# assert_copied NAME: both sides succeeded, the copy is byte for byte the original, and each side
# printed the digest that sha256sum computes independently for its own file.
assert_copied() {
    assert_success
    assert_equal "$peer_status" 0
    cmp "$IN/$1" "$OUT/$1"
    assert_line "$(sha256sum "$IN/$1")"
    assert_peer_line "$(sha256sum "$OUT/$1")"
    assert_line --partial "Receiver's digest matches: "
    assert_line --index -1 "Sample finished successfully"
    assert_peer_line --index -1 "Sample finished successfully"
    assert_equal "$(ls -A "$OUT")" "$1" # no temporary file left beside it
}

@test "rdma_file_transfer: sizes 0, 1, chunk-1, chunk, chunk+1 and slots*chunk+1 arrive intact" {
    local size
    for size in 0 1 $((CHUNK - 1)) $CHUNK $((CHUNK + 1)) $((SLOTS * CHUNK + 1)); do
        rm -rf "${OUT:?}"/*
        random_file "f$size" "$size"
        transfer -- "$IN/f$size"
        assert_copied "f$size"
        PORT=$((PORT + 1))
    done
}
