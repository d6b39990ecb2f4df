# shellcheck shell=bash
# tests/vm/boot.bash: how the VM boots: the accelerator (KVM when a trial boot under it is quick, else
# TCG; tried once per boot of this host), the host's TSC frequency for the kernel command line, and
# QEMU's base arguments (microvm, the prepared kernel and initramfs, the host's root over 9p) that
# run, shell and the accelerator probe share. Sourced by tests/vm/vm, never run by itself.
# QEMU options are comma-separated lists (SC2054).
# shellcheck disable=SC2054

tsc_khz() {
    local mhz khz
    mhz=$(awk -F: '/^cpu MHz/{gsub(/ /, "", $2); print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
    if [ -n "$mhz" ]; then
        awk -v m="$mhz" 'BEGIN{printf "%d\n", m * 1000}'
    elif khz=$(cat /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq 2>/dev/null) && [ -n "$khz" ]; then
        echo "$khz"
    else
        echo 2000000
    fi
}

# base_args ACCEL: qargs=(...) with the machine, the kernel and the host root; the caller adds the
# console and its folders.
base_args() {
    local acc=$1
    local append khz
    khz=$(tsc_khz)
    append="console=ttyS0 panic=-1 tsc=reliable cryptomgr.notests tsc_early_khz=$khz"
    if [ "${RDMA_SAMPLES_VM_DEBUG:-0}" = 1 ]; then append+=" loglevel=7 rdma_vm.debug"; else append+=" quiet loglevel=0"; fi
    [ -z "${probe:-}" ] || append+=" rdma_vm.probe"
    # RDMA_SAMPLES_VM_ASLR=off (every test of ./lab test; tests/meson.build): no address randomization
    # in the guest. TCG reuses the code it has translated only where the same code runs again at the
    # same address, and randomization moves every process's program and libraries, so each start
    # pays for translating the loader, libc, libibverbs and the sanitizer runtime again: a sanitizer
    # pair costs about half the emulated CPU without it (tests/results.md). On, the default, the VM
    # behaves like the real host a learner runs the samples on (./lab demo, ./lab vm).
    case "${RDMA_SAMPLES_VM_ASLR:-on}" in
    on) ;;
    off) append+=" norandmaps" ;;
    *) die "RDMA_SAMPLES_VM_ASLR=$RDMA_SAMPLES_VM_ASLR: on or off" ;;
    esac
    # The guest's timer tick under TCG. QEMU's default CPU model (qemu64) lacks ARAT (an APIC timer that
    # keeps running in deep idle states, which every x86 CPU since 2010 has), so the kernel takes its
    # local timer for one that stops in idle, finds no broadcast timer on microvm to stand in for it,
    # and keeps the tick periodic: 250 interrupts a second even when nothing runs, about 5% of a host
    # core per idle VM under emulation. With +arat the idle tick stops (NOHZ). highres=off keeps the
    # timers' resolution at a jiffy (4 ms) as before: with high-resolution timers, every short sleep of
    # a program waiting for its peer wakes it on time, which cost the waiting suites more than the idle
    # ticks saved (tests/results.md). RDMA_SAMPLES_VM_TICK=periodic puts the old tick back.
    # RDRAND, which QEMU's TCG emulates and every x86 server CPU has: the guest kernel trusts it
    # (CONFIG_RANDOM_TRUST_CPU), so its random number generator is ready 0.07 s into the boot. Without
    # it, qemu64 has no source but interrupts, which an idle tickless VM has few of: the generator was
    # not ready at 3.8 s, and every program's std::random_device (getrandom(2), which blocks until it
    # is) waited; on a loaded CI machine a suite's pairs ran past their 120 s bound (tests/results.md).
    local cpu_model=host
    if [ "$acc" != kvm ]; then
        cpu_model=qemu64,+rdrand
        case "${RDMA_SAMPLES_VM_TICK:-tickless}" in
        tickless) cpu_model+=,+arat append+=" highres=off" ;;
        periodic) ;;
        *) die "RDMA_SAMPLES_VM_TICK=$RDMA_SAMPLES_VM_TICK: tickless or periodic" ;;
        esac
    fi
    [ -z "${RDMA_SAMPLES_VM_APPEND:-}" ] || append+=" $RDMA_SAMPLES_VM_APPEND"
    # RDMA_SAMPLES_VM_SMP=N (./lab bench): N vCPUs on multi-threaded TCG, each vCPU on a host thread of
    # its own, so that two busy-polling processes spin at once (tests/vm/smp-soak: no hang in 161 boots
    # of microvm with 2 vCPUs). RDMA_SAMPLES_VM_TCG_THREAD=single puts them back on one host thread (the
    # fallback); RDMA_SAMPLES_VM_MACHINE (microvm, pc or q35) is for smp-soak. One vCPU: QEMU's default.
    local smp=${RDMA_SAMPLES_VM_SMP:-1} accel_arg=$acc machine=${RDMA_SAMPLES_VM_MACHINE:-microvm}
    local thread=${RDMA_SAMPLES_VM_TCG_THREAD:-} machine_arg
    [ -n "$thread" ] || [ "$smp" = 1 ] || thread=multi
    [ -z "$thread" ] || [ "$acc" != tcg ] || accel_arg=tcg,thread=$thread
    # vbus: the virtio transport of every device (run.bash's too): MMIO on microvm, which has no PCI.
    case "$machine" in
    microvm) vbus=device machine_arg=microvm,x-option-roms=off ;;
    pc | q35) vbus=pci machine_arg=$machine ;;
    *) die "RDMA_SAMPLES_VM_MACHINE=$machine: microvm, pc or q35" ;;
    esac
    qargs=(
        -M "$machine_arg" -accel "$accel_arg" -m 1024 -smp "$smp" -no-reboot -nodefaults
        -display none -no-user-config
        -kernel "$kdir/vmlinux" -initrd "$kdir/initrd.gz" -append "$append"
        -fsdev local,id=fs0,path=/,security_model=none,readonly=on,multidevs=remap
        -device "virtio-9p-$vbus,fsdev=fs0,mount_tag=hostroot"
    )
    qargs+=(-cpu "$cpu_model")
}

# accel: kvm when /dev/kvm runs this kernel quickly, else tcg. Tried once per boot of this host.
# (Where /dev/kvm is PVM, a software hypervisor, the Debian kernel crawls: the probe times out.)
accel() {
    if [ -n "${RDMA_SAMPLES_ACCEL:-}" ]; then
        echo "$RDMA_SAMPLES_ACCEL"
        return
    fi
    local boot memo=$cache/accel
    boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
    if [ -f "$memo" ] && [ "$(head -n 1 "$memo")" = "$boot" ]; then
        tail -n 1 "$memo"
        return
    fi
    local result=tcg
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
        say "trying KVM (once per boot of this machine)"
        local log
        log=$(mktemp "$cache/probe.XXXXXX")
        local probe=1 qargs=()
        base_args kvm
        timeout -k 2 10 qemu-system-x86_64 "${qargs[@]}" -serial "file:$(qesc "$log")" \
            </dev/null >/dev/null 2>&1 3>&- || true
        grep -q rdma-vm-probe-ok "$log" && result=kvm
        rm -f "$log"
        say "accelerator: $result"
    fi
    printf '%s\n%s\n' "$boot" "$result" >"$memo.$$"
    mv "$memo.$$" "$memo"
    echo "$result"
}
