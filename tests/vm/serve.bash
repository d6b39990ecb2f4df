# shellcheck shell=bash
# tests/vm/serve.bash: a VM that stays up and runs commands on request: `start`, `exec`, `stop`.
# Sourced by tests/vm/vm, never run by itself.
#
# The test suites boot one VM per suite (two for two_host) and run only the programs under test in it:
# Bats, its assertions and the tests' own logic run on this machine at native speed. Under TCG every
# instruction in the VM costs tens of host instructions, so what runs there is what the run costs.
#
# The channel is a session folder SESSION on this machine, shared writable with the VM at the same path
# (9p, uncached), and a doorbell: a virtio serial port whose host end is the FIFO SESSION/ctl.in.
#   SESSION/q/ID.sh        the command, its directory and environment (written here)
#   SESSION/q/ID.out, .err its output (written there, followed here live; its stdin is /dev/null)
#   SESSION/q/ID.pid, .rc  its process group and, at the end, its exit status (written there)
#   SESSION/tmp            a folder both sides see: the tests' files go here (TMPDIR)
#   SESSION/vm.pid, vm.log the `vm run` process that holds the VM, and what it said
#   SESSION/commands       one line per command sent (the time table counts them)
# `exec` writes ID.sh and rings "run ID"; the agent in the VM (tests/vm/agent) starts it. A timeout or
# a signal here rings "kill ID SIG". The agent sleeps in read(2) between requests: no polling there.

# session_dir DIR: DIR as an absolute path that exists, or a usage error.
session_dir() {
    [ -n "$1" ] || usage_error "--dir takes the session folder"
    [ -d "$1" ] || die "session folder $1 does not exist (tests/vm/vm start --dir $1 creates it)"
    (cd "$1" && pwd -P)
}

# vm_alive SESSION: the `vm run` process holding the session's VM is running.
vm_alive() {
    local pid
    [ -f "$1/vm.pid" ] && read -r pid <"$1/vm.pid" && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# last_words SESSION: what the VM's holder said and the console's last lines, indented, on stderr.
last_words() {
    {
        tail -n 10 "$1/vm.log" 2>/dev/null
        local jobdir
        if read -r jobdir <"$1/ctl.job" 2>/dev/null && [ -f "$jobdir/console.log" ]; then
            echo "console:"
            tail -n 15 "$jobdir/console.log"
        fi
    } | tr -d '\r' | sed 's/^/  /' >&2
}

cmd_start() {
    local dir="" boot_timeout=180 run_args=()
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) [ $# -ge 2 ] || usage_error "--dir takes a folder"; dir=$2; shift 2 ;;
        --boot-timeout)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage_error "--boot-timeout takes a number of seconds"
            boot_timeout=$2
            shift 2
            ;;
        --timeout | --share | --net | --ip | --name | --provider)
            [ $# -ge 2 ] || usage_error "$1 takes a value"
            run_args+=("$1" "$2")
            shift 2
            ;;
        *) usage_error "start: unknown option $1 (see tests/vm/vm --help)" ;;
        esac
    done
    [ -n "$dir" ] || usage_error "start needs --dir SESSION"
    mkdir -p "$dir/q" "$dir/tmp" || die "cannot create the session folder $dir"
    dir=$(session_dir "$dir")
    ! vm_alive "$dir" || die "a VM already serves $dir"
    rm -f "$dir/ready" "$dir/ctl.in" "$dir/ctl.out" "$dir/ctl.job"
    mkfifo "$dir/ctl.in" "$dir/ctl.out" || die "cannot create the control FIFOs in $dir"
    ensure_prepared
    # (siw.ko is built here, once, rather than behind the boot timeout below)
    case " ${run_args[*]} " in *" --provider siw "*) local siw_ko siw_kver siw_series siw_ver; ensure_siw || return 1 ;; esac
    # The holder: `vm run` with the agent as its job, in the background, past this command's end.
    "$self" run --control "$dir/ctl" --share "$dir" "${run_args[@]}" -- bash "$here/agent" "$dir" \
        </dev/null >"$dir/vm.log" 2>&1 3>&- &
    echo $! >"$dir/vm.pid"
    local deadline=$((SECONDS + boot_timeout))
    until [ -e "$dir/ready" ]; do
        if ! vm_alive "$dir"; then
            say "the VM serving $dir stopped before its agent was ready:"
            last_words "$dir"
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "the VM serving $dir was not ready after $boot_timeout s (--boot-timeout); stopping it"
            last_words "$dir"
            kill -TERM "$(cat "$dir/vm.pid")" 2>/dev/null || true
            return 1
        fi
        sleep 0.1
    done
}

# write_command FILE ID MERGED CMD...: the script the agent sources in a subshell with job control: this
# shell's directory and environment (as write_job in run.bash), then CMD in the background (so in a
# process group of its own), its pid and exit status recorded. MERGED=1: its stderr goes where its
# stdout goes, in the VM, so that their order is kept (as run.bash does).
write_command() {
    local file=$1 id=$2 merged=$3 q=${1%/*}
    shift 3
    {
        job_env 'RDMA_SAMPLES_|ASAN_|UBSAN_|LSAN_|VALGRIND_' TMPDIR
        echo 'export HOME=/root LANG=C.UTF-8 TERM=dumb RDMA_SAMPLES_IN_VM=1'
        printf 'q=%q id=%q rc=125\n' "$q" "$id"
        printf 'if cd %q 2>"$q/$id.err"; then\n   ' "$PWD"
        printf ' %q' "$@"
        if [ "$merged" = 1 ]; then
            echo ' </dev/null >"$q/$id.out" 2>&1 &'
        else
            echo ' </dev/null >"$q/$id.out" 2>"$q/$id.err" &'
        fi
        echo '    echo $! >"$q/$id.pid"'
        echo '    wait $!'
        echo '    rc=$?'
        echo 'fi'
        # (no temporary file and mv: each mv is a process, about 80 ms here; the host waits for a
        # non-empty file, and one short write fills it)
        echo 'echo $rc >"$q/$id.rc"'
    } >"$file"
}

cmd_exec() {
    local dir="" timeout_s=600
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) [ $# -ge 2 ] || usage_error "--dir takes a folder"; dir=$2; shift 2 ;;
        --timeout)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout takes a number of seconds"
            timeout_s=$2
            shift 2
            ;;
        --) shift; break ;;
        *) usage_error "exec: unknown option $1 (see tests/vm/vm --help)" ;;
        esac
    done
    [ $# -gt 0 ] || usage_error "usage: tests/vm/vm exec --dir SESSION [--timeout S] -- CMD [ARGS...]"
    dir=$(session_dir "$dir")
    [ -e "$dir/ready" ] && vm_alive "$dir" || die "no VM serves $dir (tests/vm/vm start --dir $dir)"
    local q=$dir/q id=$$-$RANDOM$RANDOM
    : >"$q/$id.out"
    : >"$q/$id.err"
    # Where this command's stdout and stderr are the same file, pipe or terminal (`run`, `>f 2>&1`), the
    # VM merges them: two files followed apart would interleave by timing, not in the order written.
    local merged=0
    ! same_output || merged=1
    write_command "$q/$id.sh" "$id" "$merged" "$@"
    local cmd_args=("$@")
    exec {bell}<>"$dir/ctl.in"

    # A signal here (timeout(1), Ctrl-C) reaches the command in the VM: TERM, then KILL if it is still
    # there 10 s later; this ends once it has (its files are gone only then: the agent reads its pid).
    local waiter="" rc=0 p
    # where_now: before a command that overran is stopped, the agent says where each of its processes
    # waits (tests/vm/agent, where_command): a test that hit its bound then names the wait that did not
    # end, where its output alone stops at the last line printed.
    where_now() {
        printf 'where %s\n' "$id" >&"$bell"
        local n=0 line
        while [ ! -s "$q/$id.where" ] && vm_alive "$dir" && [ "$n" -lt 40 ]; do
            n=$((n + 1))
            sleep 0.05
        done
        [ -s "$q/$id.where" ] || return 0
        say "still running when stopped: $* (pid, name, state, where in the VM's kernel):"
        while IFS= read -r line; do printf 'vm:   %s\n' "$line" >&2; done <"$q/$id.where"
    }
    stop_command() {
        # (a second signal must not cut this short and leave the command running: timeout(1) sends its
        # TERM to this process and then to its whole process group, this process included)
        trap '' INT TERM HUP USR1
        # (TERM is what timeout(1) sends at a test's bound; Ctrl-C is a person, who knows why)
        [ "$1" != TERM ] || where_now "${cmd_args[@]}"
        printf 'kill %s %s\n' "$id" "$1" >&"$bell"
        local n=0
        while [ ! -s "$q/$id.rc" ] && vm_alive "$dir" && [ "$n" -lt 300 ]; do
            n=$((n + 1))
            [ "$n" != 200 ] || printf 'kill %s KILL\n' "$id" >&"$bell"
            sleep 0.05
        done
        # (reaped here, quietly: a killed job left to the shell is reported on stderr at its exit, as
        # "... Killed ( ... done ) 3>&-", which would end the program's output)
        if [ -n "$waiter" ]; then
            kill -KILL "$waiter" 2>/dev/null || true
            wait "$waiter" 2>/dev/null || true
        fi
        stop_children
        rm -f "$q/$id".*
        exit "$2"
    }
    trap 'stop_command INT 130' INT
    trap 'stop_command TERM 143' TERM
    trap 'stop_command HUP 129' HUP
    # (SIGKILL cannot be caught: SIGUSR1 here means SIGKILL there, for the tests that kill a program)
    trap 'stop_command KILL 137' USR1

    printf 'run %s\n' "$id" >&"$bell"
    echo "$id" >>"$dir/commands" # (counted by run.bash for the time table: one short append each)

    # The waiter ends when the command has (0), when the VM is gone (3) or at the deadline (4); the
    # tails follow the output until the waiter is gone, then print what is left.
    (
        trap '' INT TERM HUP USR1 # (timeout(1) signals the whole group: the main shell decides)
        deadline=$((SECONDS + timeout_s))
        exec {nap_fd}<> <(:)
        while [ ! -s "$q/$id.rc" ]; do
            vm_alive "$dir" || exit 3
            [ "$SECONDS" -lt "$deadline" ] || exit 4
            read -rt 0.05 -u "$nap_fd" _ || true
        done
    ) 3>&- &
    waiter=$!
    tail -n +1 -s 0.05 -f --pid="$waiter" "$q/$id.out" 3>&- &
    tail_pids+=($!)
    tail -n +1 -s 0.05 -f --pid="$waiter" "$q/$id.err" >&2 3>&- &
    tail_pids+=($!)
    wait "$waiter" || rc=$?
    for p in "${tail_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    tail_pids=()
    trap - INT TERM HUP USR1
    case "$rc" in
    0) read -r rc <"$q/$id.rc" ;;
    3)
        say "the VM serving $dir stopped while it ran: $*"
        last_words "$dir"
        rc=125
        ;;
    *)
        say "timed out after $timeout_s s (--timeout) in the VM: $*; killing it"
        where_now "$@"
        last_words "$dir"
        stop_command KILL 124
        ;;
    esac
    rm -f "$q/$id".*
    return "$rc"
}

cmd_stop() {
    local dir=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) [ $# -ge 2 ] || usage_error "--dir takes a folder"; dir=$2; shift 2 ;;
        *) usage_error "stop: unknown option $1 (see tests/vm/vm --help)" ;;
        esac
    done
    dir=$(session_dir "$dir")
    vm_alive "$dir" || return 0
    exec {bell}<>"$dir/ctl.in"
    printf 'quit\n' >&"$bell"
    local _
    for _ in {1..300}; do
        vm_alive "$dir" || return 0
        sleep 0.1
    done
    say "the VM serving $dir did not power off within 30 s; killing it"
    kill -TERM "$(cat "$dir/vm.pid")" 2>/dev/null || true
    return 1
}
