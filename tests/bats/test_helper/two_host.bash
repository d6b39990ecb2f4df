# Two "machines" for the two_host suite: two Soft-RoCE VMs joined by a virtual network.
#
# Host A is 10.77.0.1, host B is 10.77.0.2; each has its own NIC and its own rxe0 bound to it. A folder
# both can write ($SHARE) stands in for copying descriptor files between the machines (scp).

VM=${RDMA_SAMPLES_SOURCE:?}/tests/vm/vm

# Across a link that loses packets the linger after the last message is what is tested: the full one.
unset RDMA_SAMPLES_TEST_LINGER_MS

require_vm() {
    if vm_available && "$VM" prepare >/dev/null 2>&1; then
        return 0
    fi
    local how="two_host needs QEMU and the Soft-RoCE VM: ./lab deps, then tests/vm/vm prepare"
    [ "${CI:-}" = true ] && fail "$how (CI=true: a skipped device test counts as a failure)"
    skip "$how"
}

setup_two_hosts() {
    require_vm
    SHARE=$BATS_TEST_TMPDIR/share
    mkdir -p "$SHARE"
    PORT=$((20000 + (RANDOM % 20000)))
}

# The two VMs stay up for the whole file (run-bats --two-host starts them: tests/vm/vm start) and
# run each host's command through `tests/vm/vm exec`; the tests' files, $SHARE among them, are in a
# folder both VMs see (TMPDIR). Without them (bats run by hand), each command boots its VM.
# host_cmd a|b: the command line (in array `host`) that runs a command on that host.
host_cmd() {
    local session=RDMA_SAMPLES_VM_SESSION_${1^^}
    if [ -n "${!session:-}" ]; then
        host=("$VM" exec --dir "${!session}" --timeout 180 --)
    elif [ "$1" = a ]; then
        host=("$VM" run --timeout 180 --name host-a --net "listen:$PORT" --ip 10.77.0.1/24 --share "$SHARE" --)
    else
        host=("$VM" run --timeout 180 --name host-b --net "connect:$PORT" --ip 10.77.0.2/24 --share "$SHARE" --)
    fi
}

# on_host_a CMD...: start CMD on host A (listening side of the network) in the background.
on_host_a() {
    local host
    host_cmd a
    "${host[@]}" "$@" >"$BATS_TEST_TMPDIR/host-a.out" 2>&1 3>&- &
    echo $! >"$BATS_TEST_TMPDIR/host-a.pid"
}

# on_host_b CMD...: run CMD on host B under Bats' `run` ($status, $output), then collect host A's
# result in $peer_status and $peer_output.
on_host_b() {
    local host
    host_cmd b
    run "${host[@]}" "$@"
    peer_status=0
    wait "$(cat "$BATS_TEST_TMPDIR/host-a.pid")" || peer_status=$?
    peer_output=$(cat "$BATS_TEST_TMPDIR/host-a.out")
    # Shown by Bats only when the test fails: what the other machine said.
    printf 'host A (exit status %s):\n%s\n' "$peer_status" "$peer_output"
}

# trace_on_hosts ARGS...: trace/trace ARGS (the build under test; under `run`). On the two VMs that
# stay up for the file when there are (trace --vms: a capture boots nothing), else on two of its own.
# The caller sets TRACE, its --out, first: teardown_two_hosts then mends the link.
trace_on_hosts() {
    local vms=()
    [ -z "${RDMA_SAMPLES_VM_SESSION_A:-}" ] || vms=(--vms "$RDMA_SAMPLES_VM_SESSION_A" "$RDMA_SAMPLES_VM_SESSION_B")
    RDMA_SAMPLES_BUILD_DIR="$RDMA_SAMPLES_BUILD" "$RDMA_SAMPLES_SOURCE/trace/trace" "${vms[@]}" "$@"
}

# teardown_two_hosts: what a failed test left running on either host is killed, so that the next test
# finds its ports free; after a test through trace_on_hosts, each host's link is put back as the next
# test expects it (no netem, no CM filter, no pinned MAC address: trace _mend-link), whatever the
# capture's end was.
teardown_two_hosts() {
    local h session
    for h in A B; do
        session=RDMA_SAMPLES_VM_SESSION_$h
        [ -n "${!session:-}" ] || continue
        "$VM" exec --dir "${!session}" --timeout 30 -- \
            pkill -KILL -f "^${RDMA_SAMPLES_BUILD:-/nonexistent}/" >/dev/null 2>&1 || true
        [ -z "${TRACE:-}" ] || "$VM" exec --dir "${!session}" --timeout 30 -- "$RDMA_SAMPLES_SOURCE/trace/trace" _mend-link \
            >/dev/null 2>&1 || true
    done
}

# Descriptor paths as each machine sees them: the shared folder is where the copies land.
responder_on_a() { echo -ld "$SHARE/responder.desc" -re "$SHARE/requester.desc" -m "$SHARE/resource.desc" -t 60; }
requester_on_b() { echo -ld "$SHARE/requester.desc" -re "$SHARE/responder.desc" -m "$SHARE/resource.desc" -t 60; }
