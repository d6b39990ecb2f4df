# shellcheck shell=bash
# tests/vm/lib.bash: what every piece of tests/vm/vm uses: messages (say, die, usage_error), the
# temporary state of this process (QEMU, the tails following a job's output, child VMs, temporary
# folders) and its clean-up however the process ends (EXIT, INT, TERM), QEMU's option quoting, and a
# test for a listening TCP port. Sourced by tests/vm/vm, never run by itself.

say() { printf 'vm: %s\n' "$*" >&2; }
die() {
    printf 'vm: %s\n' "$*" >&2
    exit 1
}
# A bad command line: exit status 2.
usage_error() {
    printf 'vm: %s\n' "$*" >&2
    exit 2
}

# Temporary state of this process, cleaned up however it ends.
job=
work=
qpid=
tail_pids=()
child_pids=()
stop_children() {
    local p all=(${qpid:+"$qpid"} ${child_pids[@]+"${child_pids[@]}"} ${tail_pids[@]+"${tail_pids[@]}"})
    for p in ${all[@]+"${all[@]}"}; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in ${all[@]+"${all[@]}"}; do
        wait "$p" 2>/dev/null || true
    done
    qpid=
    child_pids=()
    tail_pids=()
}
cleanup() {
    stop_children
    rm -rf "${job:-}" "${work:-}"
}
on_signal() {
    trap - INT TERM
    say "interrupted: stopping the VM"
    cleanup
    exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# QEMU's option syntax: a comma inside a value is written twice.
qesc() { printf '%s' "${1//,/,,}"; }

# port_listening PORT: something on this host listens on TCP 127.0.0.1:PORT (or any address).
port_listening() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {found = 1} END {exit !found}' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
