# Shared helpers for the Bats suites: load with `load test_helper/common`.
#
# Programs come from $RDMA_SAMPLES_BUILD (meson test sets it). Every test gets its own descriptor
# paths under $BATS_TEST_TMPDIR, so tests never see each other's files.

bats_require_minimum_version 1.5.0

# load_bats_library NAME: what `bats_load_library NAME` does, without its processes. A library's
# load.bash finds each of its files with `$(dirname ...)`, a fork and an exec per file: bats-support and
# bats-assert have 15, about a second of CPU per test in the emulated VM, where every process is
# expensive. Their files only define functions, so sourcing each one from the library's folder on
# BATS_LIB_PATH is the same; a library laid out otherwise is loaded the usual way.
load_bats_library() {
    local dirs d f
    IFS=: read -ra dirs <<<"${BATS_LIB_PATH:-/usr/lib/bats}"
    for d in "${dirs[@]}"; do
        if [ -f "$d/$1/load.bash" ] && [ -d "$d/$1/src" ]; then
            for f in "$d/$1"/src/*.bash; do
                # shellcheck disable=SC1090
                source "$f"
            done
            return 0
        fi
    done
    bats_load_library "$1"
}
load_bats_library bats-support
load_bats_library bats-assert

# has_rdma_device, cm_addr, and nap and holds_text for the polls below: the tools' library.
# shellcheck source=tests/tools.bash
. "$BATS_TEST_DIRNAME/../tools.bash"

# The responders keep their QP after the last message as long as a lost ACK could make the peer resend
# (retransmit_window_ms(), 500 ms on rxe). On one device no ACK is lost: 100 ms is plenty here
# (RDMA_SAMPLES_TEST_LINGER_MS, a test-only knob; the program says it was used). The tests of the
# linger itself and of lossy links (two_host) unset it.
export RDMA_SAMPLES_TEST_LINGER_MS=${RDMA_SAMPLES_TEST_LINGER_MS-100}

BUILD=${RDMA_SAMPLES_BUILD:?set RDMA_SAMPLES_BUILD to the Meson build directory (meson test does)}

# Where the device is. With a device here, the programs run here. Without one, run-bats keeps a
# Soft-RoCE VM up for the whole file (tests/vm/vm start) and names its session folder in
# RDMA_SAMPLES_VM_SESSION: the tests run here, at native speed, and each program they start runs in
# the VM through `tests/vm/vm exec` (its output live, its exit status, a signal passed on). The test's
# files are in a folder both see (TMPDIR is in the session folder), at the same path.
served() { [ -n "${RDMA_SAMPLES_VM_SESSION:-}" ]; }

# at_device CMD...: run CMD where the device is (for what is not a program of the build: rdma, tc,
# strace, cat of a counter, ...).
at_device() {
    if served; then
        "$RDMA_SAMPLES_SOURCE/tests/vm/vm" exec --dir "$RDMA_SAMPLES_VM_SESSION" --timeout 900 -- "$@"
    else
        "$@"
    fi
}

# device_path PATH: PATH itself, or in a served run a command here that runs PATH in the VM (a small
# script in the session folder, made once a run), so that `run`, `timeout`, start_peer and $(...) use a
# program of the build the same way in both cases.
device_path() {
    served || {
        echo "$1"
        return 0
    }
    local shim
    shim=$RDMA_SAMPLES_VM_SESSION/bin/${1//\//_}
    if [ ! -x "$shim" ]; then
        mkdir -p "${shim%/*}"
        printf '#!/bin/sh\nexec %q exec --dir %q --timeout 900 -- %q "$@"\n' \
            "$RDMA_SAMPLES_SOURCE/tests/vm/vm" "$RDMA_SAMPLES_VM_SESSION" "$1" >"$shim.$$"
        chmod +x "$shim.$$"
        mv "$shim.$$" "$shim"
    fi
    echo "$shim"
}

# kill_program SIGNAL PID: send SIGNAL (KILL, TERM, INT or HUP) to a program started through its
# device_path: in a served run PID is `vm exec`, which passes the signal on (SIGKILL as SIGUSR1, which
# it can catch) and ends once the program has.
kill_program() {
    if served && [ "$1" = KILL ]; then
        kill -USR1 "$2"
    else
        kill -s "$1" "$2"
    fi
}

# prog NAME: the path of a built program (through device_path), e.g. prog rdma_write_requester
prog() {
    local p
    for p in "$BUILD"/*/"$1"; do
        if [ -x "$p" ]; then
            device_path "$p"
            return 0
        fi
    done
    echo "no program $1 under $BUILD; build first (./lab build)" >&2
    return 1
}

# require_rdma_device: skip with a how-to when there is no RDMA device; under CI=true that is a failure.
require_rdma_device() {
    served || has_rdma_device && return 0
    local how="no RDMA device here: run ./lab test (it runs this suite inside the Soft-RoCE VM), or create one: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev lo"
    if [ "${CI:-}" = true ]; then
        fail "$how (CI=true: a skipped device test counts as a failure)"
    fi
    skip "$how"
}

# require_device_test NAME: an RDMA device (as above) and the device test program tests/device/NAME,
# built; its path in $DEVICE_TEST.
require_device_test() {
    require_rdma_device
    DEVICE_TEST=$BUILD/tests/device/$1
    [ -x "$DEVICE_TEST" ] || fail "no $DEVICE_TEST; build first (./lab build)"
    DEVICE_TEST=$(device_path "$DEVICE_TEST")
}

# Descriptor paths for one pair of processes on one host: each side writes its own file and reads the
# other's. The responder writes the mmap (or sync-event) descriptor; the requester reads it.
requester_paths() {
    echo -ld "$BATS_TEST_TMPDIR/requester.desc" -re "$BATS_TEST_TMPDIR/responder.desc" -m "$BATS_TEST_TMPDIR/resource.desc"
}
responder_paths() {
    echo -ld "$BATS_TEST_TMPDIR/responder.desc" -re "$BATS_TEST_TMPDIR/requester.desc" -m "$BATS_TEST_TMPDIR/resource.desc"
}

# start_peer NAME CMD...: start CMD in the background (bounded by `timeout`), output in
# $BATS_TEST_TMPDIR/NAME.out. FD 3 is closed, or Bats would wait for the process.
start_peer() {
    local name=$1
    shift
    timeout -k 5 "${PEER_TIMEOUT:-120}" "$@" >"$BATS_TEST_TMPDIR/$name.out" 2>&1 3>&- &
    echo $! >"$BATS_TEST_TMPDIR/$name.pid"
}

# wait_line NAME REGEX: wait (up to 60 s) until the peer NAME (start_peer) has printed a line matching REGEX.
wait_line() {
    for _ in {1..600}; do
        grep -Eq "$2" "$BATS_TEST_TMPDIR/$1.out" && return 0
        nap 0.1
    done
    fail "$1 never printed a line matching '$2': $(cat "$BATS_TEST_TMPDIR/$1.out")"
}

# wait_peer NAME: wait for a peer started with start_peer; sets peer_status and peer_output.
wait_peer() {
    local name=$1
    peer_status=0
    wait "$(cat "$BATS_TEST_TMPDIR/$name.pid")" || peer_status=$?
    peer_output=$(cat "$BATS_TEST_TMPDIR/$name.out")
}

# stop_peer NAME: end a peer started with start_peer whose part is over (its partner has failed before
# posting, and the test asserts only on the partner) with SIGTERM, rather than wait out its -t; then
# wait_peer. `timeout` passes the signal on (in a served run to `vm exec`, which passes it to the program).
stop_peer() {
    kill -TERM "$(cat "$BATS_TEST_TMPDIR/$1.pid")" 2>/dev/null || true
    wait_peer "$1"
}

# show_both_sides: in a teardown, after a failed test, the output and exit status of both sides of its
# last pair: an assertion prints only the side it looked at, and why the other stopped is often why.
show_both_sides() {
    [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${peer_output+set}" ] || return 0
    printf '%s\n' "-- the side started first (exit ${peer_status:-?}):" "$peer_output" \
        "-- the side under run (exit ${status:-?}):" "$output"
}

# teardown: every file's, unless it has its own (which then calls show_both_sides itself).
teardown() { show_both_sides; }

# run_pair RESPONDER [ARGS...] -- REQUESTER [ARGS...]
# The responder (or receiver) runs in the background; the requester runs under `run`, so $status and
# $output are the requester's. Afterwards $peer_status and $peer_output are the responder's (assert on
# them with assert_peer_line and its siblings). Extra `run` flags (e.g. -1 for an expected exit status)
# go in RUN_FLAGS.
run_pair() { pair_run files "$@"; }

# cm_pair SERVER [ARGS...] -- CLIENT [ARGS...]: run_pair for RDMA CM: the server in the background, the
# client under `run` once the server listens; $peer_status/$peer_output are the server's.
cm_pair() { pair_run cm "$@"; }

# pair_run files|cm FIRST [ARGS...] -- SECOND [ARGS...]: what run_pair and cm_pair share.
pair_run() {
    local flow=$1 first=()
    shift
    while [ "$1" != -- ]; do
        first+=("$1")
        shift
    done
    shift
    start_peer responder "${first[@]}"
    [ "$flow" = files ] || wait_listening responder
    # shellcheck disable=SC2086
    run ${RUN_FLAGS:-} timeout -k 5 "${PEER_TIMEOUT:-120}" "$@"
    wait_peer responder
}

# on_peer_output CMD...: run CMD (an assertion of bats-assert) with $output and $lines set to the peer's
# output, as `run` splits it; the requester's $output and $lines are back afterwards.
on_peer_output() {
    local output=$peer_output lines=()
    IFS=$'\n' read -d '' -r -a lines <<<"$output" || true
    "$@"
}
# assert_peer_line, refute_peer_line, assert_peer_output, refute_peer_output: assert_line, refute_line,
# assert_output and refute_output (same options) on the peer's output.
assert_peer_line() { on_peer_output assert_line "$@"; }
refute_peer_line() { on_peer_output refute_line "$@"; }
assert_peer_output() { on_peer_output assert_output "$@"; }
refute_peer_output() { on_peer_output refute_output "$@"; }

# regex_quote TEXT: TEXT as an extended regular expression that matches it literally (for assert_regex,
# which prints the text when it does not match).
regex_quote() { sed 's/[][\\.*^$(){}?+|]/\\&/g' <<<"$1"; }

# quoted LINE_PREFIX TEXT: extract the "..." part of the line that starts with LINE_PREFIX.
quoted() {
    local line
    line=$(grep -F -- "$1" <<<"$2" | head -n 1)
    line=${line#*\"}
    echo "${line%\"*}"
}

# require_cm_addr: skip (fail under CI=true) when there is no address RDMA CM can use; sets CM_ADDR.
require_cm_addr() {
    CM_ADDR=$(cm_addr) && return 0
    local how="RDMA CM needs the RDMA device bound to an Ethernet interface with an IPv4 address (not lo); run this file with tests/bats/run-bats --cm (meson test does), or set RDMA_SAMPLES_CM_ADDR"
    if [ "${CI:-}" = true ]; then
        fail "$how (CI=true: a skipped device test counts as a failure)"
    fi
    skip "$how"
}

# wait_listening NAME: wait (up to 60 s) until the server started with start_peer NAME is listening.
wait_listening() {
    local _
    for _ in {1..600}; do
        holds_text "$BATS_TEST_TMPDIR/$1.out" "listening on port" && return 0
        nap 0.1
    done
    return 1
}

# spoil_in_flight FROM TO SED_EXPR: stand between the two sides, in the background. Wait for the
# descriptor the responder writes to FROM, rewrite it with `sed SED_EXPR`, and hand it on as TO (the
# path the requester reads), atomically, as a copy between machines would.
spoil_in_flight() {
    local from=$1 to=$2 expr=$3
    (
        for _ in {1..300}; do [ -f "$from" ] && break; nap 0.05; done
        sed "$expr" "$from" >"$to.tmp" && mv "$to.tmp" "$to"
    ) 3>&- &
}

# under_memlock LIMIT_KIB PROGRAM ARGS...: the build's PROGRAM where the device is (in the VM: one
# shell there runs it), under `ulimit -l LIMIT_KIB` and without CAP_IPC_LOCK, which root (as in the VM)
# holds and which lifts the limit.
under_memlock() {
    local limit=$1 program
    program=$(RDMA_SAMPLES_VM_SESSION='' prog "$2") # its own path: the shell is already at the device
    shift 2
    "$(device_path /bin/bash)" -c 'ulimit -l "$1" || exit 99
        shift
        if [ "$(id -u)" = 0 ]; then exec setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock "$@"; fi
        exec "$@"' _ "$limit" "$program" "$@"
}
