# shellcheck shell=bash
# tests/tools.bash: what the tools share about where an RDMA device is, and how they wait without a
# process. Sourced by lab, tests/bats/run-bats, the Bats helpers (test_helper/common.bash),
# tests/stress/stress, trace/trace and rdma_bench/support/bench. (The pairs themselves are in tests/pairs.bash.)
#
#   has_rdma_device        this machine has an RDMA device with an ACTIVE port
#   device_here            has_rdma_device, or this machine is the Soft-RoCE VM (RDMA_SAMPLES_IN_VM=1)
#   vm_available           the Soft-RoCE VM can be booted here (tests/vm/vm and QEMU)
#   cm_addr                the IPv4 address RDMA CM tests connect to
#   on_device [OPTIONS] -- CMD...
#                          the one convention for "run here or in the VM": sets the array `device_cmd`
#                          to CMD when device_here, else to the VM command that runs CMD in one boot,
#                          with RDMA_SAMPLES_IN_VM=1 set inside (so CMD, which is often the caller
#                          itself, knows it is there). The caller runs it: "${device_cmd[@]}", or exec.
#   nap SECONDS            sleep, with no `sleep` process
#   holds_text FILE TEXT   FILE exists and holds TEXT, with no `grep` process

# (${BASH_SOURCE%/*}, not $(dirname ...): every Bats test sources this file, in the VM too)
tools_dir=${BASH_SOURCE[0]%/*}
[ "$tools_dir" != "${BASH_SOURCE[0]}" ] || tools_dir=.
tools_root=$(cd "$tools_dir/.." && pwd)
unset tools_dir

# has_rdma_device: true when an RDMA device with an ACTIVE port exists on this machine.
has_rdma_device() {
    local state s
    for state in /sys/class/infiniband/*/ports/*/state; do
        # (read, not $(cat ...): every Bats test asks, and in the emulated VM a process is expensive)
        [ -r "$state" ] && read -r s <"$state" || continue
        case "$s" in *ACTIVE*) return 0 ;; esac
    done
    return 1
}

# nap SECONDS: sleep without starting a process: read times out on a pipe nobody writes to, opened at
# the first nap (a shell that never naps opens none). The scripts that run in the emulated VM poll with
# it: there a `sleep` or `grep` process costs about 25 ms of CPU, taken from the programs under test.
nap() {
    [ -n "${nap_fd:-}" ] || exec {nap_fd}<> <(:)
    read -rt "$1" -u "$nap_fd" _ || true
}

# holds_text FILE TEXT: FILE exists and holds TEXT (read with a builtin, as nap says why).
holds_text() {
    local text=
    IFS= read -rd '' text <"$1" 2>/dev/null || [ -n "$text" ] || return 1
    [[ $text == *"$2"* ]]
}

device_here() { [ "${RDMA_SAMPLES_IN_VM:-0}" = 1 ] || has_rdma_device; }

vm_available() { [ -x "$tools_root/tests/vm/vm" ] && command -v qemu-system-x86_64 >/dev/null 2>&1; }

# cm_addr: the IPv4 address RDMA CM tests connect to: $RDMA_SAMPLES_CM_ADDR (on_device --cm sets it in
# the VM), else the address of the interface the first RDMA device is bound to. 127.0.0.1 cannot work:
# the kernel's rdma_cm resolves loopback addresses only on InfiniBand, and rxe on `lo` is not Ethernet.
cm_addr() {
    if [ -n "${RDMA_SAMPLES_CM_ADDR:-}" ]; then
        echo "$RDMA_SAMPLES_CM_ADDR"
        return 0
    fi
    local netdev addr
    netdev=$(rdma link show 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p' | head -n 1)
    addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | grep -v '^127\.' | head -n 1)
    echo "$addr"
    [ -n "$addr" ]
}

# on_device [--cm] [--timeout SECONDS] [--share DIR]... -- CMD...: set `device_cmd` (see above).
#   --cm          in the VM, rxe0 is bound to eth0 with 10.77.0.1 (a network with no second VM on it:
#                 traffic to our own address loops back inside rxe), which CMD finds in
#                 RDMA_SAMPLES_CM_ADDR. The kernel's rdma_cm cannot resolve 127.0.0.1 on RoCE, and rxe
#                 on `lo` is not Ethernet.
#   --siw         in a VM with Soft-iWARP (siw0 on eth0, 10.77.0.1), even where this machine has a device;
#                 RDMA_SAMPLES_CM_ADDR set inside, as with --cm (iWARP connects only through RDMA CM)
#   --timeout S   bound for the whole VM (default 1500)
#   --share DIR   a folder the VM may write (repeatable)
# Without a device and without the VM, `device_cmd` is CMD: its device tests skip with a how-to (the
# caller may refuse earlier, with vm_available).
# shellcheck disable=SC2034 # (device_cmd is for the caller)
on_device() {
    local cm=0 timeout=1500 vm_args=() siw=0
    while [ $# -gt 0 ]; do
        case "$1" in
        --cm) cm=1 ;;
        --siw) siw=1 ;;
        --timeout) timeout=$2; shift ;;
        --share) vm_args+=(--share "$2"); shift ;;
        --) shift; break ;;
        *) printf 'on_device: unknown option %s\n' "$1" >&2; return 2 ;;
        esac
        shift
    done
    device_cmd=("$@")
    if { [ "$siw" = 0 ] && device_here; } || ! vm_available; then
        return 0
    fi
    local inside=(RDMA_SAMPLES_IN_VM=1)
    if [ "$siw" = 1 ]; then # (the VM's own NIC, siw0 on it, 10.77.0.1)
        vm_args+=(--provider siw)
        inside+=(RDMA_SAMPLES_CM_ADDR=10.77.0.1)
    elif [ "$cm" = 1 ]; then
        vm_args+=(--net "listen:$((20000 + RANDOM % 20000))" --ip 10.77.0.1/24)
        inside+=(RDMA_SAMPLES_CM_ADDR=10.77.0.1)
    fi
    device_cmd=("$tools_root/tests/vm/vm" run --timeout "$timeout" "${vm_args[@]}" -- env "${inside[@]}" "$@")
}
