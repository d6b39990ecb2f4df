#!/usr/bin/env bats
# The command line of every program: --help, bad flags. No RDMA device needed.

load test_helper/common

programs() {
    find "$BUILD" -mindepth 2 -maxdepth 2 -type f -perm -u+x -name 'rdma_*' -printf '%f\n' | sort
}

@test "every program is built under its DOCA name" {
    run programs
    assert_success
    assert_line rdma_write_requester
    assert_line rdma_write_responder
    assert_line rdma_send
    assert_line rdma_receive
    assert_line rdma_send_immediate
    assert_line rdma_receive_immediate
    assert_line rdma_read_requester
    assert_line rdma_read_responder
    assert_line rdma_write_immediate_requester
    assert_line rdma_write_immediate_responder
    assert_line rdma_atomic_requester
    assert_line rdma_atomic_responder
    assert_line rdma_extended_requester
    assert_line rdma_extended_responder
    assert_line rdma_sync_event_requester
    assert_line rdma_sync_event_responder
    assert_line rdma_multi_conn_send
    assert_line rdma_multi_conn_receive
    assert_line rdma_srq_receive
    assert_line rdma_ud_send
    assert_line rdma_ud_receive
    assert_line rdma_file_sender
    assert_line rdma_file_receiver
    assert_line rdma_event_loop_server
    assert_line rdma_event_loop_client
    assert_line rdma_recovery_requester
    assert_line rdma_recovery_responder
    assert_line rdma_recovery_client
    assert_line rdma_recovery_server
    assert_line rdma_memory_register
    assert_line rdma_memory_fork
    assert_line rdma_multicast_send
    assert_line rdma_multicast_receive
}

@test "--help exits 0 and lists every common flag with its default" {
    local p
    for p in $(programs); do
        run -0 "$(prog "$p")" --help
        assert_line --partial "Usage: $p"
        for flag in "-d, --device" "-g, --gid-index" "-t, --timeout SECONDS" "-v, --verbose" "-h, --help"; do
            assert_output --partial -- "$flag"
        done
        assert_output --partial "(default: 30)"
        case $p in
        rdma_file_* | rdma_recovery_client | rdma_recovery_server) # RDMA CM only: no descriptor files
            assert_output --partial -- "-lp, --listen-port PORT"
            refute_output --partial -- "--local-descriptor-path" ;;
        rdma_memory_register | rdma_memory_fork | rdma_multicast_*) # no peer to name: no descriptor, no -lp
            refute_output --partial -- "--local-descriptor-path"
            refute_output --partial -- "--listen-port" ;;
        rdma_event_loop_*) # RDMA CM only: the descriptor flags are there to be refused with the reason
            assert_output --partial -- "-lp, --listen-port PORT"
            assert_output --partial -- "-ld, --local-descriptor-path PATH           refused: this program connects with RDMA CM only" ;;
        *)
            assert_output --partial -- "-ld, --local-descriptor-path"
            assert_output --partial -- "-re, --remote-descriptor-path"
            assert_output --partial "(default: /tmp/local_connection_desc_path.txt)" ;;
        esac
    done
}

@test "-h is --help" {
    run -0 "$(prog rdma_write_requester)" -h
    assert_line --partial "-w, --write-string TEXT"
    assert_output --partial '(default: "Hi RDMA!")'
}

@test "an unknown flag exits 2 with one line naming it" {
    local p
    for p in $(programs); do
        run -2 --separate-stderr "$(prog "$p")" --no-such-flag
        assert_equal "$output" ""
        assert_equal "$stderr" "$p: unknown flag \"--no-such-flag\" (see --help)"
    done
}

@test "a bad value exits 2 with one line saying what was expected" {
    run -2 --separate-stderr "$(prog rdma_write_requester)" -t 0
    assert_equal "$stderr" 'rdma_write_requester: -t: expected a number from 1 to 86400, got "0"'
    run -2 --separate-stderr "$(prog rdma_write_requester)" -g x
    assert_equal "$stderr" 'rdma_write_requester: -g: expected a number from 0 to 255, got "x"'
    run -2 --separate-stderr "$(prog rdma_write_requester)" -d
    assert_equal "$stderr" 'rdma_write_requester: -d: missing value'
}

@test "a write string over 256 bytes is refused before anything starts" {
    run -2 --separate-stderr "$(prog rdma_write_requester)" -w "$(printf 'x%.0s' {1..257})"
    assert_equal "$stderr" 'rdma_write_requester: -w: the string is 257 bytes; the limit is 256'
}

@test "the responder takes no -w, and -ld and -re must differ" {
    run -2 --separate-stderr "$(prog rdma_write_responder)" -w hi
    assert_equal "$stderr" 'rdma_write_responder: unknown flag "-w" (see --help)'
    run -2 --separate-stderr "$(prog rdma_write_responder)" -ld /tmp/x -re /tmp/x
    assert_output ""
    assert_equal "$stderr" 'rdma_write_responder: -ld and -re name the same file "/tmp/x"; this side would read its own descriptor'
}

@test "the send/receive programs take no -m; the receivers take --recv-size and --no-prepost-receive" {
    local p
    for p in rdma_send rdma_receive rdma_send_immediate rdma_receive_immediate; do
        run -2 --separate-stderr "$(prog "$p")" -m /tmp/x
        assert_equal "$stderr" "$p: unknown flag \"-m\" (see --help)"
    done
    for p in rdma_receive rdma_receive_immediate; do
        run -0 "$(prog "$p")" --help
        assert_line --regexp '^  --recv-size (N|BYTES) +.*receive buffer.*\(default: 256\)$'
        assert_line --partial "--no-prepost-receive"
        refute_output --partial "-s, --send-string"
        run -2 --separate-stderr "$(prog "$p")" --recv-size 0
        assert_equal "$stderr" "$p: --recv-size: expected a number from 1 to 256, got \"0\""
        run -2 --separate-stderr "$(prog "$p")" --no-prepost-receive=1
        assert_equal "$stderr" "$p: --no-prepost-receive: takes no value"
    done
    run -0 "$(prog rdma_send)" --help
    assert_line --partial "-s, --send-string TEXT"
}

@test "with no RDMA device at all, the error says how to get one" {
    # An empty driver folder hides every device, real or Soft-RoCE, from libibverbs.
    mkdir -p "$BATS_TEST_TMPDIR/no-drivers"
    IBV_CONFIG_DIR=$BATS_TEST_TMPDIR/no-drivers run -1 --separate-stderr "$(prog rdma_write_requester)" -t 1
    assert_line --index 0 "step 1: open an RDMA device and allocate a protection domain"
    assert_line "Sample finished with errors"
    assert_equal "$(grep -c . <<<"$stderr")" 2
    assert_regex "$stderr" "requester: step 1 failed: no RDMA device found"
    assert_regex "$stderr" "hint: .*modprobe rdma_rxe && rdma link add rxe0 type rxe netdev"
    assert_regex "$stderr" "\./lab vm"
}

@test "rdma_multi_conn: -nc > 1 on an RDMA CM client is a usage error" {
    run -2 --separate-stderr "$(prog rdma_multi_conn_send)" -cm -sa 10.0.0.1 -nc 4
    assert_equal "$stderr" 'rdma_multi_conn_send: -nc 4: an RDMA CM client makes one connection; start one client per connection (the server, without -sa, takes -nc N)'
}

@test "-cm on a pair: the requester needs -sa, the responder refuses it (usage errors, before any device is opened)" {
    run -2 --separate-stderr "$(prog rdma_read_requester)" -cm
    assert_equal "$stderr" 'rdma_read_requester: -cm: the requester connects to the other side; give its address with -sa ADDR'
    run -2 --separate-stderr "$(prog rdma_receive)" -cm -sa 10.0.0.1
    assert_equal "$stderr" 'rdma_receive: -cm: the receiver listens and takes no -sa; give -sa 10.0.0.1 to the side that connects'
}

@test "every pair takes -cm, -lp, -sa and -sat (--help lists them)" {
    local p
    for p in rdma_write_requester rdma_write_responder rdma_read_requester rdma_read_responder \
        rdma_write_immediate_requester rdma_write_immediate_responder rdma_send rdma_receive \
        rdma_send_immediate rdma_receive_immediate rdma_atomic_requester rdma_atomic_responder \
        rdma_sync_event_requester rdma_sync_event_responder rdma_extended_requester rdma_extended_responder; do
        run -0 "$(prog "$p")" --help
        assert_line --partial "-cm, --use-rdma-cm"
        assert_line --partial "-sa, --server-addr"
    done
}

@test "./lab trace: a bad command line is one line and exit status 2, before any VM boots" {
    local trace=$RDMA_SAMPLES_SOURCE/trace/trace
    run "$trace" --out "$BATS_TEST_TMPDIR/t" nosuch
    assert_equal "$status" 2
    assert_output "trace: unknown sample 'nosuch' (see ./lab trace --help)"
    run "$trace" --out "$BATS_TEST_TMPDIR/t" send_receive --spoil-rkey
    assert_equal "$status" 2
    assert_output "trace: --spoil-rkey: send_receive exports no memory (no rkey)"
    run "$trace" --out "$BATS_TEST_TMPDIR/t" write --cm --kill-responder
    assert_equal "$status" 2
    assert_output "trace: --kill-responder works with descriptor files, not --cm"
    run "$trace" --out "$BATS_TEST_TMPDIR/t" write --vms "$BATS_TEST_TMPDIR/a"
    assert_equal "$status" 2
    assert_output "trace: --vms needs SESSION_A SESSION_B"
    run "$trace" --out "$BATS_TEST_TMPDIR/t" write --timeout 0
    assert_equal "$status" 2
    run "$trace" --help
    assert_success
    assert_line --partial "Usage: ./lab trace SAMPLE"
}

@test "rdma_file_transfer: FILE is required and taken once, the sender needs -sa, the ring's flags are checked" {
    local send recv
    send=$(prog rdma_file_sender)
    recv=$(prog rdma_file_receiver)
    run -2 --separate-stderr "$send" -sa 10.0.0.1
    assert_equal "$stderr" "rdma_file_sender: missing FILE (see --help)"
    run -2 --separate-stderr "$send" -sa 10.0.0.1 a b
    assert_equal "$stderr" 'rdma_file_sender: unexpected argument "b" (flags start with -; see --help)'
    run -2 --separate-stderr "$send" /etc/hostname
    assert_equal "$stderr" "rdma_file_sender: the sender connects to the other side; give its address with -sa ADDR"
    run -2 --separate-stderr "$recv" -sa 10.0.0.1
    assert_equal "$stderr" "rdma_file_receiver: the receiver listens and takes no -sa; give -sa 10.0.0.1 to the side that connects"
    run -2 --separate-stderr "$recv" --slots 0
    assert_equal "$stderr" 'rdma_file_receiver: --slots: expected a number from 1 to 16777216, got "0"'
    run -2 --separate-stderr "$recv" --chunk 2g
    assert_equal "$stderr" 'rdma_file_receiver: --chunk: expected a number from 1 to 1073741824, got "2g"'
    run -2 --separate-stderr "$recv" -ld /tmp/x
    assert_equal "$stderr" 'rdma_file_receiver: unknown flag "-ld" (see --help)'
    # -o has no default: a name from the network never lands in whatever directory the receiver started in
    run -2 --separate-stderr "$recv" -lp 1
    assert_equal "${stderr_lines[0]}" "rdma_file_receiver: -o is required: the directory (or file path) to store the received file in"
    assert_equal "${stderr_lines[1]}" "hint: e.g. -o ~/incoming; a sender's name is used only inside a directory you chose"
    run -2 --separate-stderr "$recv" -o "$BATS_TEST_TMPDIR" --slots 2048 --chunk 1048576
    assert_equal "${stderr_lines[0]}" "rdma_file_receiver: --slots 2048 --chunk 1048576: a ring of more than 1073741824 bytes"
    run -2 --separate-stderr "$recv" -o "$BATS_TEST_TMPDIR" --deadline 0
    assert_equal "$stderr" 'rdma_file_receiver: --deadline: expected a number from 1 to 604800, got "0"'
    run -2 --separate-stderr "$send" -sa 10.0.0.1 --deadline x /etc/hostname
    assert_equal "$stderr" 'rdma_file_sender: --deadline: expected a number from 1 to 604800, got "x"'
}

@test "./lab bench: a bad command line is one line and exit status 2, before any VM boots" {
    local bench=$RDMA_SAMPLES_SOURCE/rdma_bench/support/bench
    run --separate-stderr "$bench" --out "$BATS_TEST_TMPDIR/b" --pairs 0
    assert_equal "$status" 2
    assert_equal "$stderr" "bench: --pairs takes a number (3 or more for medians)"
    run --separate-stderr "$bench" --out "$BATS_TEST_TMPDIR/b" --vcpus 9
    assert_equal "$status" 2
    assert_equal "$stderr" "bench: --vcpus takes 1 to 8"
    run --separate-stderr "$bench" --out "$BATS_TEST_TMPDIR/b" -g first
    assert_equal "$status" 2
    assert_equal "$stderr" "bench: -g takes a GID index"
    run "$bench" --help
    assert_success
    assert_line --partial "--profile     only the counts"
    assert_line --partial "--qps         only the points with several queue pairs"
}

@test "tests/stress/stress: a bad command line is one line and exit status 2, before any VM boots" {
    local stress=$RDMA_SAMPLES_SOURCE/tests/stress/stress
    run --separate-stderr "$stress" --kill --jobs 0
    assert_equal "$status" 2
    assert_equal "$stderr" "stress: --jobs takes 1 to 99"
    run --separate-stderr "$stress" --pairs nosuch
    assert_equal "$status" 2
    assert_equal "$stderr" "stress: unknown pair 'nosuch' (see --help)"
    run "$stress" --help
    assert_success
    assert_line --partial "--jobs N          run up to N runs"
}

@test "tests/vm/smp-soak: --help, and a bad command line is one line and exit status 2, before any VM boots" {
    local soak=$RDMA_SAMPLES_SOURCE/tests/vm/smp-soak
    run -0 "$soak" --help
    assert_line --partial "--machine M      microvm, pc or q35"
    run -2 --separate-stderr "$soak" --machine virt --out "$BATS_TEST_TMPDIR/s"
    assert_equal "$stderr" "smp-soak: --machine takes microvm, pc or q35"
    run -2 --separate-stderr "$soak" --boots 0 --out "$BATS_TEST_TMPDIR/s"
    assert_equal "$stderr" "smp-soak: --boots takes a number"
    run -2 --separate-stderr "$soak" --kvm --out "$BATS_TEST_TMPDIR/s"
    assert_equal "$stderr" 'smp-soak: unknown argument "--kvm" (see --help)'
    [ ! -e "$BATS_TEST_TMPDIR/s" ]
}
