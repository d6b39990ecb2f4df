# shellcheck shell=bash
# tests/vm/check.bash: `tests/vm/vm check`: boot a VM and run ibv_rc_pingpong on its Soft-RoCE device
# over lo; `check --two-host`: boot two VMs joined by a virtual network and a shared folder, and run
# ibv_rc_pingpong between them. Each prints PASS or FAIL. Sourced by tests/vm/vm, never run by itself.
# The guest-side scripts are single-quoted on purpose (SC2016).
# shellcheck disable=SC2016

# The checks' guest side: find the IPv4-mapped RoCE v2 GID of rxe0.
gid_index_sh='gid_index() {
    local f i g t
    for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
        i=${f##*/}
        g=$(cat "$f" 2>/dev/null) || continue
        t=$(cat "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i" 2>/dev/null) || continue
        case "$g" in 0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { echo "$i"; return; } ;; esac
    done
    echo 1
}
# listening PORT: a TCP socket listens on PORT in this VM.
listening() {
    awk -v p="$(printf ":%04X" "$1")" '\''$4 == "0A" && substr($2, length($2) - 4) == p {f = 1} END {exit !f}'\'' \
        /proc/net/tcp /proc/net/tcp6
}
wait_listening() { local n=0; until listening "$1"; do n=$((n + 1)); [ $n -lt 300 ] || return 1; sleep 0.1; done; }
'

cmd_check() {
    case "$*" in
    --two-host) check_two_host; return ;;
    "--provider siw") check_siw; return ;;
    "" | "--provider rxe") ;;
    *) usage_error "check: unknown option $* (see tests/vm/vm --help)" ;;
    esac
    local rc=0
    cmd_run --timeout 180 --name check -- bash -c "$gid_index_sh"'
        show() { echo "\$ $*"; "$@"; }
        show ibv_devices && show ibv_devinfo -d rxe0 && show rdma link show || exit 1
        g=$(gid_index)
        echo "\$ ibv_rc_pingpong -d rxe0 -g $g -n 100 &   # server (GID $g: $(cat /sys/class/infiniband/rxe0/ports/1/gids/$g))"
        ibv_rc_pingpong -d rxe0 -g "$g" -n 100 >/tmp/server.out 2>&1 &
        server=$!
        wait_listening 18515
        show ibv_rc_pingpong -d rxe0 -g "$g" -n 100 127.0.0.1
        client=$?
        wait "$server"
        srv=$?
        sed "s/^/server: /" /tmp/server.out
        [ "$client" = 0 ] && [ "$srv" = 0 ]
    ' || rc=$?
    if [ "$rc" = 0 ]; then echo "PASS: Soft-RoCE loopback (ibv_rc_pingpong on rxe0)"; else echo "FAIL: Soft-RoCE loopback (exit status $rc)"; fi
    return "$rc"
}

check_two_host() {
    local share port ra=0 rb=0 t0=$SECONDS
    share=$(mktemp -d "${TMPDIR:-/tmp}/rdma-samples-two-host.XXXXXX")
    work=$share
    port=$((20000 + RANDOM % 20000))
    while port_listening "$port"; do port=$((20000 + RANDOM % 20000)); done
    # Host A: the server. It tells B it is listening through the shared folder (which also shows that
    # a file one VM writes there is seen by the other at once).
    "$self" run --timeout 300 --name host-a --net "listen:$port" --ip 10.77.0.1/24 --share "$share" -- \
            bash -c "$gid_index_sh"'
            g=$(gid_index)
            echo "rxe0 on eth0, GID index $g: $(cat /sys/class/infiniband/rxe0/ports/1/gids/$g)"
            ibv_rc_pingpong -d rxe0 -g "$g" -n 100 &
            server=$!
            wait_listening 18515 && date +%s.%N >"$1/a-listening"
            wait "$server"
            ' a "$share" > >(sed -u 's/^/[host-a] /') 2>&1 3>&- &
    local apid=$!
    child_pids+=("$apid")
    "$self" run --timeout 300 --name host-b --net "connect:$port" --ip 10.77.0.2/24 --share "$share" -- \
            bash -c "$gid_index_sh"'
            g=$(gid_index)
            echo "rxe0 on eth0, GID index $g: $(cat /sys/class/infiniband/rxe0/ports/1/gids/$g)"
            n=0
            until [ -f "$1/a-listening" ]; do
                n=$((n + 1)); [ $n -lt 1200 ] || { echo "host A never said it listens"; exit 1; }
                sleep 0.1
            done
            echo "host A listens (it wrote $1/a-listening, seen here after $n polls of 0.1 s)"
            ibv_rc_pingpong -d rxe0 -g "$g" -n 100 10.77.0.1
            ' b "$share" > >(sed -u 's/^/[host-b] /') 2>&1 3>&- &
    local bpid=$!
    child_pids+=("$bpid")
    wait "$apid" || ra=$?
    wait "$bpid" || rb=$?
    child_pids=()
    sleep 0.2 # the prefixing seds finish their last lines
    rm -rf "$share"
    work=
    if [ "$ra" = 0 ] && [ "$rb" = 0 ]; then
        echo "PASS: Soft-RoCE two hosts (ibv_rc_pingpong 10.77.0.2 -> 10.77.0.1, $((SECONDS - t0)) s)"
    else
        echo "FAIL: Soft-RoCE two hosts (host A exit status $ra, host B exit status $rb)"
        return 1
    fi
}

# check_siw: one VM with Soft-iWARP (siw0 on eth0, 10.77.0.1): rping's server and client through RDMA
# CM (iWARP connects only through a CM, so ibv_rc_pingpong, which exchanges QPNs over TCP, cannot run).
check_siw() {
    local rc=0
    command -v rping >/dev/null || die "rping not found (apt-get install rdmacm-utils)"
    cmd_run --timeout 180 --name check-siw --provider siw -- bash -c "$gid_index_sh"'
        show() { echo "\$ $*"; "$@"; }
        show ibv_devices && show rdma link show || exit 1
        echo "\$ rping -s -a 10.77.0.1 -C 10 -v &   # server"
        rping -s -a 10.77.0.1 -C 10 -v >/tmp/server.out 2>&1 &
        server=$!
        wait_listening 7174
        show rping -c -a 10.77.0.1 -C 10 -v
        client=$?
        wait "$server"
        srv=$?
        sed "s/^/server: /" /tmp/server.out
        [ "$client" = 0 ] && [ "$srv" = 0 ]
    ' || rc=$?
    if [ "$rc" = 0 ]; then echo "PASS: Soft-iWARP (rping on siw0)"; else echo "FAIL: Soft-iWARP (exit status $rc)"; fi
    return "$rc"
}
