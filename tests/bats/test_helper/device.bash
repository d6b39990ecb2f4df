# has_rdma_device: true when an RDMA device with an ACTIVE port exists on this machine.
has_rdma_device() {
    local state
    for state in /sys/class/infiniband/*/ports/*/state; do
        [ -r "$state" ] || continue
        case "$(cat "$state")" in *ACTIVE*) return 0 ;; esac
    done
    return 1
}

# cm_addr: the IPv4 address RDMA CM tests connect to: $RDMA_SAMPLES_CM_ADDR (run-bats --cm sets it in
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
