#!/usr/bin/env bats
# The provider matrix: every pair of the pair table (tests/pairs.bash) in each of its flows, descriptor
# files and RDMA CM, on the device at hand, and the table of what became of each: passed, refused (with
# the line the programs printed), or failed. ./lab test runs it on Soft-iWARP (run-bats --provider siw),
# where the pairs that need what iWARP lacks must refuse at once, at step 1, with one line naming it;
# on Soft-RoCE or InfiniBand every cell passes. The table is printed as TAP comments and written to
# $RDMA_SAMPLES_BUILD/provider-matrix-<device>-<kernel release>.txt (e.g. siw0-6.1.0-56-amd64): ./lab
# test runs it on two kernels (RDMA_SAMPLES_VM_KERNEL).

load test_helper/common

setup_file() {
    require_rdma_device
    local info
    info=$(at_device ibv_devinfo)
    DEV=$(sed -n 's/^hca_id:[[:space:]]*//p' <<<"$info" | head -n 1)
    TRANSPORT=$(sed -n 's/^[[:space:]]*transport:[[:space:]]*\([A-Za-z]*\).*/\1/p' <<<"$info" | head -n 1)
    # (siw's vendor_id, SIW_VENDOR_ID: the samples name Soft-iWARP's lack of immediate data as siw's)
    VENDOR=$(sed -n 's/^[[:space:]]*vendor_id:[[:space:]]*//p' <<<"$info" | head -n 1)
    KERNEL=$(at_device uname -r)
    export DEV TRANSPORT VENDOR KERNEL
    MATRIX=$BATS_FILE_TMPDIR/matrix
    export MATRIX
    : >"$MATRIX"
}

teardown_file() {
    local out=$BUILD/provider-matrix-${DEV:-unknown}-${KERNEL:-unknown}.txt
    {
        printf 'provider matrix on %s (transport %s, Linux %s): pair x flow\n' "${DEV:-?}" "${TRANSPORT:-?}" "${KERNEL:-?}"
        [ ! -s "${MATRIX:-/nonexistent}" ] || awk -F'\t' '{ printf "  %-24s %-6s %s\n", $1, $2, $3 }' "$MATRIX"
    } >"$out.tmp" && mv "$out.tmp" "$out"
    sed 's/^/# /' "$out" >&3
}

setup() {
    require_rdma_device
    CM_ADDR=$(cm_addr) || true
    . "$RDMA_SAMPLES_SOURCE/tests/pairs.bash"
}

# What iWARP lacks, as the programs say it (common/src/device.cpp); "passed" elsewhere.
# expected PAIR FLOW: "passed", or (an extended regular expression) the refusal every side prints after
# "ROLE: step 1 failed: ".
expected() {
    local line
    line=$(expected_text "$@")
    case "$line" in
    passed) echo passed ;;
    *) regex_quote "$line" ;;
    esac
}

# expected_text PAIR FLOW: the same, as text.
expected_text() {
    local iwarp="$DEV is an iWARP device (transport_type IBV_TRANSPORT_IWARP)"
    if [ "$TRANSPORT" != iWARP ]; then
        echo passed
        return 0
    fi
    case "$1" in
    write_immediate | send_receive_immediate | file_transfer | recovery_cm | extended)
        if [ "$VENDOR" = 0x626d74 ]; then
            echo "$DEV is a Soft-iWARP device (siw, transport_type IBV_TRANSPORT_IWARP): siw has no immediate data (no RDMA WRITE or SEND with immediate; iWARP's RDMAP defines none)"
        else
            echo "$iwarp: iWARP's RDMAP defines no immediate data, and this pair's WRITE or SEND with immediate is not run on iWARP here"
        fi ;;
    atomic) echo "device $DEV does not support atomic operations (atomic_cap is IBV_ATOMIC_NONE)" ;;
    ud | multicast) echo "$iwarp: iWARP has no unreliable datagram (UD) queue pairs" ;;
    memory_window) echo "device $DEV has no memory windows (max_mw 0)" ;;
    *)
        if [ "$2" = files ]; then
            echo "$iwarp: iWARP connects only through RDMA CM, not with descriptor files"
        else
            echo passed
        fi
        ;;
    esac
}

# record PAIR FLOW TEXT: one cell of the table.
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$MATRIX"; }

# cell PAIR FLOW: run the pair (the side that waits in the background, then each of its requesters),
# each bounded, with the arguments of the pair table; record the cell, then assert what is expected.
cell() {
    local name=$1 flow=$2 want d=$BATS_TEST_TMPDIR t=20 port server client sargs=() cargs=() clients=1 i
    pair "$name" || fail "no pair $name in tests/pairs.bash"
    want=$(expected "$name" "$flow")
    server=$(device_path "$BUILD/$resp")
    client=$(device_path "$BUILD/$req")
    if [ "$group" = 1 ]; then # (a multicast group: the args name it)
        sargs=(-t "$t" "${resp_args[@]}")
        cargs=(-t "$t" "${req_args[@]}")
    elif [ "$flow" = cm ]; then
        [ -n "$CM_ADDR" ] || fail "no address for RDMA CM (run-bats --cm or --provider siw sets one)"
        port=$((20000 + RANDOM % 20000))
        sargs=(-cm -lp "$port" -t "$t" "${resp_args[@]}")
        cargs=(-cm -sa "$CM_ADDR" -lp "$port" -t "$t" "${cm_req_args[@]}")
        clients=$cm_clients
    else
        sargs=(-ld "$d/responder.desc" -re "$d/requester.desc" -t "$t" "${resp_args[@]}")
        cargs=(-ld "$d/requester.desc" -re "$d/responder.desc" -t "$t" "${req_args[@]}")
        if [ "$exports" = 1 ]; then
            sargs+=(-m "$d/resource.desc")
            cargs+=(-m "$d/resource.desc")
        fi
    fi
    local t0 t1 statuses=()
    t0=$(date +%s)
    timeout -k 5 120 "$server" "${sargs[@]}" >"$d/side0.out" 2>"$d/side0.err" 3>&- &
    local spid=$!
    if [ "$group" = 1 ]; then # the sender only once the receiver has attached (or has given up)
        for _ in {1..600}; do
            grep -q 'attached to' "$d/side0.out" 2>/dev/null || ! kill -0 "$spid" 2>/dev/null && break
            nap 0.1
        done
    fi
    for ((i = 1; i <= clients; i++)); do
        local rc=0
        timeout -k 5 120 "$client" "${cargs[@]}" >"$d/side$i.out" 2>"$d/side$i.err" 3>&- || rc=$?
        statuses+=("$rc")
    done
    local src=0
    wait "$spid" || src=$?
    statuses=("$src" "${statuses[@]}")
    t1=$(date +%s)

    # What happened, for the table: passed (every side), refused (every side, the expected line at step
    # 1), or failed (the first side that did neither: its error line).
    local got=passed line refusal=
    for ((i = 0; i <= clients; i++)); do
        if [ "${statuses[$i]}" != 0 ] || ! grep -qx 'Sample finished successfully' "$d/side$i.out"; then
            got=
            break
        fi
    done
    if [ -z "$got" ]; then
        for ((i = 0; i <= clients; i++)); do
            line=$(grep -m 1 'failed' "$d/side$i.err" || true)
            if [ "$want" != passed ] && [[ $line =~ ^[a-z_]+:\ step\ 1\ failed:\ ($want)$ ]]; then
                refusal=${BASH_REMATCH[1]}
            else
                got="failed: ${line:-side $i exited ${statuses[$i]} with no error line}"
                break
            fi
        done
        [ -n "$got" ] || got="refused: $refusal"
    fi
    record "$name" "$flow" "$got"

    if [ "$want" = passed ]; then
        [ "$got" = passed ] || {
            for ((i = 0; i <= clients; i++)); do cat "$d/side$i.err" >&2; done
            fail "expected $name ($flow) to pass on $DEV: $got"
        }
        # The event loop's server passes whatever became of its clients: its tally must say that both
        # finished (on iWARP a client's disconnect flushes the server's QP before the CM's event comes).
        [ "$name" != event_loop ] || grep -qx "Served 2 client(s): 2 finished, 0 dropped; 6 message(s) echoed; at most [12] connected at once" "$d/side0.out" ||
            fail "event_loop on $DEV: the server's tally is not 2 finished: $(grep -E 'closed|Served' "$d/side0.out")"
        return 0
    fi
    # A refusal: every side exits 1 at step 1 with the line (its role first, the hint after), at once
    # (well within -t: nothing waited for the peer), and no side did anything else.
    for ((i = 0; i <= clients; i++)); do
        [ "${statuses[$i]}" = 1 ] || fail "side $i of $name ($flow) exited ${statuses[$i]}, not 1: $(cat "$d/side$i.err")"
        local line
        line=$(head -n 1 "$d/side$i.err")
        [[ $line =~ ^[a-z_]+:\ step\ 1\ failed:\ ($want)$ ]] ||
            fail "side $i of $name ($flow): expected the refusal \"$want\", got \"$line\"; its output: $(cat "$d/side$i.out" "$d/side$i.err")"
        grep -q '^hint: ' "$d/side$i.err" || fail "side $i of $name ($flow): no hint line"
        grep -qx 'Sample finished with errors' "$d/side$i.out" || fail "side $i of $name ($flow): no last line"
    done
    [ $((t1 - t0)) -lt $((t / 2)) ] || fail "$name ($flow) took $((t1 - t0)) s to refuse: not at once (-t $t)"
}

@test "write, files" { cell write files; }
@test "write, cm" { cell write cm; }
@test "read, files" { cell read files; }
@test "read, cm" { cell read cm; }
@test "write_immediate, files" { cell write_immediate files; }
@test "write_immediate, cm" { cell write_immediate cm; }
@test "send_receive, files" { cell send_receive files; }
@test "send_receive, cm" { cell send_receive cm; }
@test "send_receive_immediate, files" { cell send_receive_immediate files; }
@test "send_receive_immediate, cm" { cell send_receive_immediate cm; }
@test "atomic, files" { cell atomic files; }
@test "atomic, cm" { cell atomic cm; }
@test "sync_event, files" { cell sync_event files; }
@test "sync_event, cm" { cell sync_event cm; }
@test "multi_conn, files" { cell multi_conn files; }
@test "multi_conn, cm" { cell multi_conn cm; }
@test "srq, files" { cell srq files; }
@test "srq, cm" { cell srq cm; }
@test "ud, files" { cell ud files; }
@test "ud, cm" { cell ud cm; }
@test "bench, files" { cell bench files; }
@test "bench, cm" { cell bench cm; }
@test "file_transfer, cm" { cell file_transfer cm; }
@test "event_loop, cm" { cell event_loop cm; }
@test "recovery, files" { cell recovery files; }
@test "recovery_cm, cm" { cell recovery_cm cm; }
@test "extended, files" { cell extended files; }
@test "extended, cm" { cell extended cm; }
@test "memory_window, files" { cell memory_window files; }
@test "memory_window, cm" { cell memory_window cm; }
@test "multicast, cm" { cell multicast cm; }
