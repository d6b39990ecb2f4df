# Shared helpers for the Bats suites: load with `load test_helper/common`.
#
# Programs come from $RDMA_SAMPLES_BUILD (meson test sets it). Every test gets its own descriptor
# paths under $BATS_TEST_TMPDIR, so tests never see each other's files.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

# shellcheck source=tests/bats/test_helper/device.bash
. "$BATS_TEST_DIRNAME/test_helper/device.bash"

BUILD=${RDMA_SAMPLES_BUILD:?set RDMA_SAMPLES_BUILD to the Meson build directory (meson test does)}

# prog NAME: the path of a built program, e.g. prog rdma_write_requester
prog() {
    local p
    for p in "$BUILD"/*/"$1"; do
        if [ -x "$p" ]; then
            echo "$p"
            return 0
        fi
    done
    echo "no program $1 under $BUILD; build first (./lab build)" >&2
    return 1
}

# require_rdma_device: skip with a how-to when there is no RDMA device; under CI=true that is a failure.
require_rdma_device() {
    has_rdma_device && return 0
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

# wait_peer NAME: wait for a peer started with start_peer; sets peer_status and peer_output.
wait_peer() {
    local name=$1
    peer_status=0
    wait "$(cat "$BATS_TEST_TMPDIR/$name.pid")" || peer_status=$?
    peer_output=$(cat "$BATS_TEST_TMPDIR/$name.out")
}

# run_pair RESPONDER [ARGS...] -- REQUESTER [ARGS...]
# The responder (or receiver) runs in the background; the requester runs under `run`, so $status and
# $output are the requester's. Afterwards $peer_status and $peer_output are the responder's.
# Extra `run` flags (e.g. -1 for an expected exit status) go in RUN_FLAGS.
run_pair() {
    local responder=()
    while [ "$1" != -- ]; do
        responder+=("$1")
        shift
    done
    shift
    start_peer responder "${responder[@]}"
    # shellcheck disable=SC2086
    run ${RUN_FLAGS:-} timeout -k 5 "${PEER_TIMEOUT:-120}" "$@"
    wait_peer responder
}

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
    for _ in $(seq 600); do
        grep -q "listening on port" "$BATS_TEST_TMPDIR/$1.out" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# spoil_in_flight FROM TO SED_EXPR: stand between the two sides, in the background. Wait for the
# descriptor the responder writes to FROM, rewrite it with `sed SED_EXPR`, and hand it on as TO (the
# path the requester reads), atomically, as a copy between machines would.
spoil_in_flight() {
    local from=$1 to=$2 expr=$3
    (
        for _ in $(seq 300); do [ -f "$from" ] && break; sleep 0.05; done
        sed "$expr" "$from" >"$to.tmp" && mv "$to.tmp" "$to"
    ) 3>&- &
}
