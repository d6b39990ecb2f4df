#!/usr/bin/env bats
# rdma_memory: what a registration costs by size (rdma_memory_register: the table, huge pages, the
# locked-memory limit, ibv_rereg_mr, on-demand paging and dma-bufs, every bad size) and what fork()
# does to registered memory (rdma_memory_fork, with and without ibv_fork_init()).
# The refusals asserted here are Soft-RoCE's (rxe, Debian 12's kernel 6.1 and rdma-core 44), the
# device the suite runs on: a NIC with ODP, dma-buf or rereg support answers otherwise.

load test_helper/common

setup() {
    require_rdma_device
    REGISTER=$(prog rdma_memory_register)
    FORK=$(prog rdma_memory_fork)
}

# The table's header, and a row: size, pages, reg median, min, max, dereg median (microseconds with
# one decimal), cost per page (three decimals).
header="      size    pages reg_median    reg_min    reg_max dereg_median   per_page"
row() { echo "^ +$1 +$2( +[0-9]+\.[0-9]){4} +[0-9]+\.[0-9]{3}\$"; }

# huge_pages N: reserve N huge pages of 2 MiB where the device is (root); prints the number reserved.
huge_pages() {
    at_device sh -c "echo $1 > /proc/sys/vm/nr_hugepages && cat /proc/sys/vm/nr_hugepages"
}

teardown() {
    if [ -n "${HUGE_PAGES_SET:-}" ]; then huge_pages 0 >/dev/null || true; fi
}

@test "register: the table has one row per size, each with its page count, and says how it measured" {
    run -0 --separate-stderr "$REGISTER" --sizes 4K,64K,1M --runs 3
    assert_line "step 3: registrations pin pages: nothing to ask the device beyond ibv_reg_mr()"
    assert_line "step 4: register pinned memory (IBV_ACCESS_LOCAL_WRITE), 3 runs per size, every page touched first; times in microseconds"
    assert_line "$header"
    assert_line --regexp "$(row '4 KiB' 1)"
    assert_line --regexp "$(row '64 KiB' 16)"
    assert_line --regexp "$(row '1 MiB' 256)"
    # Exactly three rows, right after the header, and nothing else printed between them and the end.
    local i
    i=$(grep -n -x -F -- "$header" <<<"$output" | cut -d: -f1)
    assert_equal "$(sed -n "$((i + 1)),\$p" <<<"$output" | grep -c -E '^ +[0-9]+ [KMG]iB ')" 3
    assert_equal "${lines[-1]}" "Sample finished successfully"
    assert_equal "${lines[-5]}" "$header"
    assert_equal "$stderr" ""
}

@test "register: --huge without huge pages reserved: one error naming /proc/sys/vm/nr_hugepages" {
    HUGE_PAGES_SET=1
    run -0 huge_pages 0
    assert_output 0
    run -1 --separate-stderr "$REGISTER" --huge --sizes 2M
    assert_line --partial "pages of 2 MiB"
    assert_equal "${stderr_lines[0]}" "register: step 4 failed: mmap(2097152 bytes, MAP_HUGETLB 2 MiB pages): Cannot allocate memory (errno 12)"
    assert_equal "${stderr_lines[1]}" "hint: not enough free 2 MiB huge pages (HugePages_Free 0 of HugePages_Total 0); reserve them as root: echo 64 > /proc/sys/vm/nr_hugepages"
}

@test "register: --huge with huge pages reserved: 2 MiB pages, one per 2 MiB" {
    HUGE_PAGES_SET=1
    run -0 huge_pages 8
    assert_output 8
    run -0 --separate-stderr "$REGISTER" --huge --sizes 2M,8M --runs 3
    assert_line --partial "pages of 2 MiB"
    assert_line --regexp "$(row '2 MiB' 1)"
    assert_line --regexp "$(row '8 MiB' 4)"
    assert_line --index -1 "Sample finished successfully"
}

@test "register: --rereg on Soft-RoCE: its provider has no rereg_mr, refused with EOPNOTSUPP before the table" {
    run -1 --separate-stderr "$REGISTER" --sizes 4K --rereg
    refute_line "$header"
    assert_equal "${stderr_lines[0]}" "register: step 3 failed: ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION): Operation not supported (errno 95)"
    assert_equal "${stderr_lines[1]}" "hint: the device's provider cannot re-register (rdma-core's rxe provider has no rereg_mr); deregister and register the new buffer instead (run without --rereg)"
    assert_line --index -1 "Sample finished with errors"
}

@test "register: over the locked-memory limit, ibv_reg_mr fails with ENOMEM and the hint names RLIMIT_MEMLOCK" {
    # 1 MiB to pin, 64 KiB allowed (and no CAP_IPC_LOCK): the 4 KiB row passes, the 1 MiB row fails.
    run -1 --separate-stderr under_memlock 64 rdma_memory_register --sizes 4K,1M --runs 2
    assert_line --regexp "$(row '4 KiB' 1)"
    refute_line --regexp "$(row '1 MiB' 256)"
    assert_equal "${stderr_lines[0]}" "register: step 4 failed: ibv_reg_mr(1 MiB): Cannot allocate memory (errno 12)"
    assert_regex "${stderr_lines[1]}" "^hint: this region would take the pages this process has pinned past its locked-memory limit .*; RLIMIT_MEMLOCK here: 64 KiB \(hard limit 64 KiB\)$"
}

@test "register: bad sizes are one line and exit 2, before any device is opened" {
    run -2 --separate-stderr "$REGISTER" --sizes 4K,0
    assert_equal "$output" ""
    assert_equal "$stderr" "rdma_memory_register: --sizes: a size of 0 registers nothing
hint: e.g. 4K,64K,1M"
    run -2 --separate-stderr "$REGISTER" --sizes 5000
    assert_equal "$output" ""
    assert_equal "${stderr_lines[0]}" "rdma_memory_register: --sizes: 5000 bytes is not a whole number of 4 KiB pages"
    run -2 --separate-stderr "$REGISTER" --huge --sizes 1M
    assert_equal "${stderr_lines[0]}" "rdma_memory_register: --sizes: 1048576 bytes is not a whole number of 2 MiB pages"
    assert_equal "${stderr_lines[1]}" "hint: with --huge every size is a multiple of 2M"
    run -2 --separate-stderr "$REGISTER" --sizes 4X
    assert_equal "$stderr" 'rdma_memory_register: --sizes: expected sizes such as 4K,64K,1M (at most 64G each), got "4X"'
    run -2 --separate-stderr "$REGISTER" --sizes 65G
    assert_equal "$stderr" 'rdma_memory_register: --sizes: expected sizes such as 4K,64K,1M (at most 64G each), got "65G"'
    run -2 --separate-stderr "$REGISTER" --runs 0
    assert_equal "$stderr" 'rdma_memory_register: --runs: expected a number from 1 to 1000, got "0"'
    run -2 --separate-stderr "$REGISTER" --dmabuf --huge
    assert_equal "$stderr" "rdma_memory_register: --dmabuf registers a dma-buf: it takes neither --odp, --huge nor --rereg"
}

@test "register: a size over the device's max_mr_size is refused at step 2 with exit 2, as a flag the device cannot take" {
    # Soft-RoCE's max_mr_size is 2^64 - 1: the test hook makes the device report 1 MiB.
    RDMA_SAMPLES_TEST_MAX_MR_SIZE=1048576 run -2 --separate-stderr "$REGISTER" --sizes 4K,2M
    assert_line --partial "(test) RDMA_SAMPLES_TEST_MAX_MR_SIZE: the device's max_mr_size taken as 1048576"
    refute_line "$header"
    assert_equal "${stderr_lines[0]}" "rdma_memory_register: --sizes: 2 MiB is larger than the device's max_mr_size (1048576 bytes)"
    assert_equal "${stderr_lines[1]}" "hint: register at most max_mr_size bytes per region (see ibv_devinfo -v), or split the buffer"
}

@test "register: --odp on Soft-RoCE: no ODP in its caps, and the registration itself is refused" {
    run -1 --separate-stderr "$REGISTER" --sizes 4K --odp
    assert_line "        odp_caps: general_caps 0x0 (IBV_ODP_SUPPORT no), rc_odp_caps 0x0"
    assert_line "The device does not support on-demand paging: ODP needs a device that takes page faults on its own DMA (e.g. mlx5, ConnectX-4 or later, with ODP enabled)"
    refute_line "$header"
    assert_equal "${stderr_lines[0]}" "register: step 3 failed: ibv_reg_mr(IBV_ACCESS_ON_DEMAND): Invalid argument (errno 22)"
    assert_equal "${stderr_lines[1]}" "hint: the device refuses on-demand registration; every registration on it pins its pages (run without --odp)"
}

@test "register: --dmabuf on Soft-RoCE: no /dev/udmabuf in Debian's kernel, and the provider takes no dma-buf" {
    run -1 --separate-stderr "$REGISTER" --sizes 4K --dmabuf
    assert_line "No /dev/udmabuf here (No such file or directory): this kernel has no udmabuf driver (CONFIG_UDMABUF; try modprobe udmabuf), so there is no dma-buf to register without a GPU"
    assert_equal "${stderr_lines[0]}" "register: step 3 failed: ibv_reg_dmabuf_mr(fd -1): Operation not supported (errno 95)"
    assert_equal "${stderr_lines[1]}" "hint: the device's provider has no dma-buf registration (rxe has none); a device needs it in its provider and kernel driver (e.g. mlx5, efa, irdma), with an exporter such as a GPU driver or udmabuf"
}

@test "fork: without ibv_fork_init the child reads the parent's bytes and writes its own copy; the parent keeps its page" {
    run -0 --separate-stderr "$FORK"
    assert_line "IBV_FORK_UNNEEDED: the kernel copies pinned pages for the child at fork() (since Linux 5.9, 5.12 for huge pages; it says so since 5.13): the parent keeps the pages the device maps"
    assert_line "The registered page is inherited by a child (no dc in its VmFlags in /proc/self/smaps)"
    assert_line 'Child read from the registered page: "Hi RDMA! (the parent'"'"'s bytes)"'
    assert_line 'Child wrote "the child'"'"'s bytes" into its copy of the page'
    assert_line "Parent's registered bytes: \"Hi RDMA! (the parent's bytes)\" (unchanged: the child wrote to a copy of its own)"
    assert_line "The child must not use the parent's verbs objects (context, PD, MR, QP, CQ): fork-friendly, not fork-safe"
    # As root (the VM), /proc/self/pagemap shows the page frame: the parent's write after fork() kept it.
    if [ "$(at_device id -u)" = 0 ]; then
        local frame
        frame=$(grep -o 'page frame 0x[0-9a-f]*' <<<"$output" | head -n 1 | cut -d' ' -f3)
        assert_line "        page frame after the parent's write: $frame (the same page: the device and the parent still meet)"
    fi
    assert_line --index -1 "Sample finished successfully"
}

@test "fork: with ibv_fork_init the registered page is MADV_DONTFORK and the child dies of SIGSEGV reading it" {
    # rdma-core 44 (Debian 12) marks every registration MADV_DONTFORK after ibv_fork_init(), although
    # the kernel copies on fork (IBV_FORK_UNNEEDED); rdma-core 51 and later skip the marking then.
    run -1 --separate-stderr "$FORK" --fork-init -t 10
    assert_line "        ibv_fork_init() = 0"
    assert_line --partial "IBV_FORK_UNNEEDED: "
    assert_line "The registered page is MADV_DONTFORK (VmFlags dc in /proc/self/smaps): fork() leaves it out of the child"
    refute_line --partial "Child read from the registered page"
    assert_line "Child killed by signal 11 (SEGV) when it read the registered page"
    assert_line "Parent's registered bytes: \"Hi RDMA! (the parent's bytes)\" (unchanged)"
    assert_equal "${stderr_lines[0]}" "fork: step 6 failed: the child was killed by SEGV when it read the registered page"
    assert_regex "${stderr_lines[1]}" "^hint: ibv_fork_init\(\) marked the registered page MADV_DONTFORK: fork\(\) left it out of the child"
    assert_line --index -1 "Sample finished with errors"
}
