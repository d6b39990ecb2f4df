# shellcheck shell=bash
# tests/vm/run.bash: `tests/vm/vm run` and `tests/vm/vm shell`: write the job the guest runs (command,
# directory, environment) into a private 9p folder, add the job's folder, the shared folders and the
# virtual network to QEMU's arguments, boot, follow the job's stdout and stderr live, and return its
# exit status (124 on --timeout). Sourced by tests/vm/vm, never run by itself.
# QEMU options are comma-separated lists (SC2054).
# shellcheck disable=SC2054

# children_cpu FILE: write to FILE the CPU seconds (user + system) of every child this shell has waited
# for. (`times` runs in this shell: in a pipe or $(...) it would report a fresh subshell's, zero.)
children_cpu() {
    times >"$1"
    awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] } printf "%.2f\n", n }' \
        "$1" >"$1.s" && mv "$1.s" "$1"
}

# job_env REGEX [NAME...]: `export NAME=value` lines (quoted with printf %q) for PATH, CI, the NAMEs and
# every exported variable whose name starts with REGEX (an extended regular expression of prefixes):
# what a command in the VM sees of this shell's environment (write_job here, write_command in serve.bash).
job_env() {
    local re=$1 v
    shift
    for v in PATH CI "$@" $(compgen -e | grep -E "^($re)" || true); do
        [ -z "${!v+x}" ] || printf 'export %s=%q\n' "$v" "${!v}"
    done
}

# write_job JOBDIR INTERACTIVE CMD...: the script the guest runs, with this shell's directory and
# environment (quoted with printf %q: spaces and quotes survive).
write_job() {
    local dir=$1 interactive=$2
    shift 2
    {
        job_env 'RDMA_SAMPLES_|BATS_|ASAN_|UBSAN_|LSAN_'
        echo 'export HOME=/root LANG=C.UTF-8'
        if [ "$interactive" = 1 ]; then
            printf 'export TERM=%q\n' "${TERM:-vt100}"
            local rows cols
            if read -r rows cols < <(stty size 2>/dev/null </dev/tty); then
                printf 'stty rows %d cols %d 2>/dev/null\n' "$rows" "$cols"
            fi
        else
            echo 'export TERM=dumb'
        fi
        printf 'cd %q || exit 1\n' "$PWD"
        printf 'exec'
        printf ' %q' "$@"
        echo
    } >"$dir/run.sh"
}

# keep_paths: host folders the guest must see although they are under /tmp (its private tmpfs).
keep_paths() {
    local p
    for p in "$PWD" "$(cd "$here/../.." && pwd)" "${RDMA_SAMPLES_SOURCE:-}" "${RDMA_SAMPLES_BUILD:-}"; do
        case "$p" in /tmp/?*) echo "$p" ;; esac
    done | sort -u
}

# same_output: this script's stdout and stderr are one file, pipe or terminal (then the job's are too,
# which keeps their order).
same_output() { [[ /proc/self/fd/1 -ef /proc/self/fd/2 ]]; }

cmd_run() {
    local timeout_s=600 name=rdma-vm net="" ip="" shares=() d control="" provider=rxe
    while [ $# -gt 0 ]; do
        case "$1" in
        --timeout)
            if [ $# -lt 2 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then usage_error "--timeout takes a number of seconds"; fi
            timeout_s=$2
            shift 2
            ;;
        --share)
            [ $# -ge 2 ] || usage_error "--share takes a folder"
            d=$(cd "$2" 2>/dev/null && pwd -P) || die "--share $2: no such folder"
            shares+=("$d")
            shift 2
            ;;
        --net)
            if [ $# -lt 2 ] || ! [[ $2 =~ ^(listen|connect):[0-9]+$ ]]; then usage_error "--net takes listen:PORT or connect:PORT"; fi
            net=$2
            shift 2
            ;;
        --ip)
            if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+/[0-9]+$ ]]; then usage_error "--ip takes A.B.C.D/PREFIX"; fi
            ip=$2
            shift 2
            ;;
        --provider)
            if [ $# -lt 2 ] || ! [[ $2 =~ ^(rxe|siw)$ ]]; then usage_error "--provider takes rxe or siw"; fi
            provider=$2
            shift 2
            ;;
        --control)
            # (tests/vm/serve.bash: the doorbell of a VM that stays up; not in the usage text)
            [ $# -ge 2 ] || usage_error "--control takes a FIFO path without .in/.out"
            control=$2
            shift 2
            ;;
        --name)
            [ $# -ge 2 ] || usage_error "--name takes a name"
            name=$2
            shift 2
            ;;
        -h | --help) usage; return 0 ;;
        --) shift; break ;;
        *) usage_error "run: unknown option $1 (see tests/vm/vm --help)" ;;
        esac
    done
    [ $# -gt 0 ] || usage_error "usage: tests/vm/vm run [OPTIONS] -- CMD [ARGS...]"
    [ -z "$net" ] || [ -n "$ip" ] || usage_error "--net needs --ip"
    # siw binds to an Ethernet device (RDMA CM does not resolve through siw on lo): alone, the VM gets
    # a NIC on a QEMU hub with no other port, and an address (--ip, or 10.77.0.1/24).
    if [ "$provider" = siw ] && [ -z "$net" ]; then
        net=alone
        ip=${ip:-10.77.0.1/24}
    fi
    [ -n "$net" ] || [ -z "$ip" ] || usage_error "--ip needs --net"
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
    # RDMA_SAMPLES_VM_PROVIDERS=device (every test of ./lab test; tests/meson.build): libibverbs in the
    # guest loads only the provider of the VM's own device (init narrows /etc/libibverbs.d). all, the
    # default: every provider the host's rdma-core installed, as on a real host.
    local providers=${RDMA_SAMPLES_VM_PROVIDERS:-all}
    [[ $providers =~ ^(all|device)$ ]] || usage_error "RDMA_SAMPLES_VM_PROVIDERS=$providers: all or device"

    local start=$SECONDS deadline=$((SECONDS + timeout_s))
    local kdir
    ensure_prepared
    local siw_ko siw_kver siw_series siw_ver
    [ "$provider" = rxe ] || ensure_siw || return 1
    local acc
    acc=$(accel)

    job=$(mktemp -d "${TMPDIR:-/tmp}/rdma-samples-vm.XXXXXX")
    write_job "$job" 0 "$@"
    echo "$provider" >"$job/provider"
    echo "$providers" >"$job/providers"
    [ "$provider" = rxe ] || cp "$siw_ko" "$job/siw.ko"
    [ -z "$control" ] || printf '%s\n' "$job" >"$control.job"
    printf '%s\n' "${shares[@]+"${shares[@]}"}" >"$job/shares"
    printf '%s' "$ip" >"$job/ip"
    keep_paths >"$job/keep"
    printf '%s\n' "$name" >"$job/hostname"
    : >"$job/out"
    : >"$job/err"
    local merged=0
    if same_output; then
        merged=1
        : >"$job/merged"
    fi

    local qargs=()
    base_args "$acc"
    qargs+=(
        -fsdev "local,id=fsj,path=$(qesc "$job"),security_model=none"
        -device "virtio-9p-$vbus,fsdev=fsj,mount_tag=job"
        -chardev "file,id=con,path=$(qesc "$job/console.log")" -serial chardev:con
    )
    # For tests/vm/smp-soak: a QEMU monitor on a Unix socket (to ask a stuck VM where its vCPUs are).
    [ -z "${RDMA_SAMPLES_VM_MONITOR:-}" ] || qargs+=(-monitor "unix:$(qesc "$RDMA_SAMPLES_VM_MONITOR"),server=on,wait=off")
    local i=0 s
    for s in "${shares[@]+"${shares[@]}"}"; do
        qargs+=(-fsdev "local,id=fss$i,path=$(qesc "$s"),security_model=none"
            -device "virtio-9p-$vbus,fsdev=fss$i,mount_tag=share$i")
        i=$((i + 1))
    done
    # The control port of `vm start` (serve.bash): a virtio serial port named rdma.ctl whose host end is
    # the FIFO pair CONTROL.in (host to guest) and CONTROL.out, which QEMU opens read-write.
    [ -z "$control" ] || qargs+=(-chardev "pipe,id=ctl,path=$(qesc "$control")" -device "virtio-serial-$vbus"
        -device virtserialport,chardev=ctl,name=rdma.ctl)
    local port=
    if [ -n "$net" ]; then
        local mac
        mac=52:54:00:$(printf '%s' "$name/$ip" | md5sum | sed 's/^\(..\)\(..\)\(..\).*/\1:\2:\3/')
        port=${net#*:}
        case "$net" in
        alone) qargs+=(-netdev hubport,id=n0,hubid=0) ;;
        listen:*) qargs+=(-netdev "socket,id=n0,listen=127.0.0.1:$port") ;;
        connect:*) qargs+=(-netdev "socket,id=n0,connect=127.0.0.1:$port") ;;
        esac
        qargs+=(-device "virtio-net-$vbus,netdev=n0,mac=$mac")
    fi

    # The job's output, streamed live from the job folder (tail follows until QEMU is gone).
    local rc=0 tries=0 left p waited= qemu_t0=
    children_cpu "$job/cpu0"
    while :; do
        if [ "${net%%:*}" = connect ] && ! port_listening "$port"; then
            # QEMU exits at once when nothing listens: wait for the other VM's QEMU.
            [ "$SECONDS" -lt "$deadline" ] || break
            if [ "$((SECONDS - start))" -ge 10 ] && [ -z "${waited:-}" ]; then
                say "$name: still waiting for a VM to listen on 127.0.0.1:$port (--net listen:$port)"
                waited=1
            fi
            sleep 0.2
            continue
        fi
        left=$((deadline - SECONDS))
        [ "$left" -gt 0 ] || break
        qemu_t0=$(date +%s.%3N)
        timeout -k 3 "$left" qemu-system-x86_64 "${qargs[@]}" </dev/null >"$job/qemu.log" 2>&1 3>&- &
        qpid=$!
        tail -n +1 -s 0.2 -f --pid="$qpid" "$job/out" 3>&- &
        tail_pids+=($!)
        if [ "$merged" = 0 ]; then
            tail -n +1 -s 0.2 -f --pid="$qpid" "$job/err" >&2 3>&- &
            tail_pids+=($!)
        fi
        rc=0
        wait "$qpid" || rc=$?
        qpid=
        # The tails print what is left and stop, QEMU being gone.
        for p in ${tail_pids[@]+"${tail_pids[@]}"}; do
            wait "$p" 2>/dev/null || true
        done
        tail_pids=()
        # A connect that lost the race (the listener went away and came back): try again.
        if [ ! -f "$job/status" ] && [ ! -s "$job/console.log" ] && [ "${net%%:*}" = connect ] &&
            [ "$rc" != 124 ] && [ "$tries" -lt 20 ] && grep -q 'Connection refused' "$job/qemu.log"; then
            tries=$((tries + 1))
            sleep 0.3
            continue
        fi
        break
    done
    # RDMA_SAMPLES_VM_CONSOLE=FILE (tests/vm/smp-soak): a copy of the serial console, however the VM ended.
    [ -z "${RDMA_SAMPLES_VM_CONSOLE:-}" ] || cp "$job/console.log" "$RDMA_SAMPLES_VM_CONSOLE" 2>/dev/null || true
    # RDMA_SAMPLES_VM_LOG (set by ./lab test): one line per boot for the time table, "NAME BOOT_S TOTAL_S
    # CPU_S TAG COMMANDS": the boot's seconds until the job started, its whole life, the CPU seconds QEMU
    # used (both of its threads: the emulated CPU and I/O), RDMA_SAMPLES_TIME_TAG (the test that booted
    # it), and the commands a VM that stayed up ran for `vm exec` (0 for a one-job boot).
    if [ -n "${RDMA_SAMPLES_VM_LOG:-}" ] && [ -f "$job/booted" ] && [ -n "$qemu_t0" ]; then
        children_cpu "$job/cpu1"
        local commands=0
        [ -z "$control" ] || [ ! -f "${control%/*}/commands" ] || commands=$(wc -l <"${control%/*}/commands")
        awk -v n="$name" -v t0="$qemu_t0" -v b="$(stat -c %.3Y "$job/booted")" -v e="$(date +%s.%3N)" \
            -v c0="$(cat "$job/cpu0")" -v c1="$(cat "$job/cpu1")" -v tag="${RDMA_SAMPLES_TIME_TAG:--}" -v k="$commands" \
            'BEGIN { printf "%s %.2f %.2f %.2f %s %d\n", n, b - t0, e - t0, c1 - c0, tag, k }' >>"$RDMA_SAMPLES_VM_LOG" || true
    fi
    if [ -f "$job/status" ]; then
        [ "${RDMA_SAMPLES_VM_DEBUG:-0}" != 1 ] || cat "$job/console.log" >&2
        return "$(cat "$job/status")"
    fi
    if [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ "$SECONDS" -ge "$deadline" ]; then
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            say "$name: timed out after $((SECONDS - start)) s (--timeout $timeout_s); the VM was killed"
        else
            say "$name: timed out after $((SECONDS - start)) s (--timeout $timeout_s) before the VM started"
        fi
        return 124
    fi
    say "$name: the VM stopped before the command finished (QEMU exit status $rc); its last words:"
    {
        tail -n 5 "$job/qemu.log"
        tail -n 15 "$job/console.log"
    } | sed 's/^/  /' | tr -d '\r' >&2
    return 1
}

cmd_shell() {
    local provider=rxe
    case "$*" in
    "" | "--provider rxe") ;;
    "--provider siw") provider=siw ;;
    *) usage_error "shell takes no arguments but --provider rxe|siw (use run -- CMD)" ;;
    esac
    local kdir acc qargs=() siw_ko siw_kver siw_series siw_ver
    ensure_prepared
    [ "$provider" = rxe ] || ensure_siw || return 1
    acc=$(accel)
    job=$(mktemp -d "${TMPDIR:-/tmp}/rdma-samples-vm.XXXXXX")
    write_job "$job" 1 bash -i
    echo "$provider" >"$job/provider"
    : >"$job/shares"
    : >"$job/ip"
    keep_paths >"$job/keep"
    : >"$job/interactive"
    echo rdma-vm >"$job/hostname"
    base_args "$acc"
    qargs+=(
        -fsdev "local,id=fsj,path=$(qesc "$job"),security_model=none"
        -device "virtio-9p-$vbus,fsdev=fsj,mount_tag=job"
        -chardev stdio,id=con,mux=on,signal=off -serial chardev:con -mon chardev=con,mode=readline
    )
    if [ "$provider" = siw ]; then
        # siw binds to an Ethernet device, as in run: a NIC of its own on a hub with no other port.
        cp "$siw_ko" "$job/siw.ko"
        printf '10.77.0.1/24' >"$job/ip"
        qargs+=(-netdev hubport,id=n0,hubid=0 -device "virtio-net-$vbus,netdev=n0,mac=52:54:00:00:00:01")
        say "starting a shell in the Soft-iWARP VM (siw0 on eth0, 10.77.0.1); 'exit' powers it off, Ctrl-A x kills it"
    else
        say "starting a shell in the Soft-RoCE VM (rxe0 on lo); 'exit' powers it off, Ctrl-A x kills it"
    fi
    qemu-system-x86_64 "${qargs[@]}" 3>&-
}
