# has_rdma_device: true when an RDMA device with an ACTIVE port exists on this machine.
has_rdma_device() {
    local state
    for state in /sys/class/infiniband/*/ports/*/state; do
        [ -r "$state" ] || continue
        case "$(cat "$state")" in *ACTIVE*) return 0 ;; esac
    done
    return 1
}
