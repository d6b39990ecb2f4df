#!/usr/bin/env bats
# rdma_file_transfer/support/bench-copy (./lab bench-copy): the copy benchmark with a tiny file, and its flags.
# Speed is never asserted, only the table's shape: every stage, the ratio, the memory rows. RDMA CM
# only: run with run-bats --cm.

load test_helper/common

BENCH=$RDMA_SAMPLES_SOURCE/rdma_file_transfer/support/bench-copy

@test "bench-copy: a tiny file, two rounds: every stage's row and CPU cost, the roofline, the memory table, the plots" {
    require_rdma_device
    require_cm_addr
    local out=$BATS_TEST_TMPDIR/bench
    RDMA_SAMPLES_BUILD_DIR=$RDMA_SAMPLES_BUILD run timeout 600 "$BENCH" --size 64K --runs 2 --chunk 16K \
        --slots 2 --memory 64K,128K --out "$out"
    assert_success
    assert_line --regexp '^stage +MiB/s min +median +max +runs$'
    for stage in write_bw transfer sha256 disk copy; do
        assert_line --regexp "^$stage +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9] +2$"
    done
    assert_line --regexp '^stage +CPU s/MiB min +median +max$'
    for stage in write_bw transfer sha256 disk copy; do
        assert_line --regexp "^$stage +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$"
    done
    assert_line --regexp '^CPU bound: [0-9]+ CPUs / \(2 x sha256 \+ transfer \+ disk = [0-9.]+ CPU s/MiB\) = [0-9.]+ MiB/s$'
    assert_line --regexp '^copy / roofline: [0-9]+\.[0-9]{2} \(medians; roofline [0-9.]+ MiB/s, the lower of the CPU bound and the slowest stage; target 0\.80\)$'
    assert_line --regexp '^copy / slowest stage \((transfer|sha256|disk)\): [0-9]+\.[0-9]{2} \(medians; target 0\.50\)$'
    assert_line --regexp '^copy / stages in series \(2 x sha256 \+ transfer \+ disk = [0-9.]+ MiB/s\): [0-9]+\.[0-9]{2}$'
    assert_line --regexp '^file +sender max RSS +receiver max RSS$'
    assert_line --regexp '^64 KiB +[0-9.]+ MiB +[0-9.]+ MiB$'
    assert_line --regexp '^128 KiB +[0-9.]+ MiB +[0-9.]+ MiB$'
    assert_equal "$(wc -l <"$out/results.csv")" 13 # the header, 5 stages x 2 rounds, 2 memory runs
    [ -s "$out/stages.svg" ] && [ -s "$out/memory.svg" ] && [ -s "$out/table.txt" ]
}

@test "bench-copy: --help lists every option" {
    run "$BENCH" --help
    assert_success
    for flag in --size --runs --chunk --slots --memory --out --vcpus --report; do
        assert_line --partial "  $flag"
    done
}

@test "bench-copy: bad flags are a usage error (status 2) with a hint" {
    run "$BENCH" --runs 0
    assert_failure 2
    assert_line 'bench-copy: --runs takes 1 to 99, got "0"'
    assert_line --regexp '^hint: '
    run "$BENCH" --size 12X
    assert_failure 2
    assert_line 'bench-copy: --size takes a size such as 256M, got "12X"'
    assert_line 'hint: K, M, G are 1024, 1024^2, 1024^3'
    run "$BENCH" --memory 1G,
    assert_failure 2
    assert_line --partial '--memory takes sizes such as 64M,1G, or none'
    run "$BENCH" --frobnicate
    assert_failure 2
    assert_line 'bench-copy: unknown argument "--frobnicate"'
    assert_line 'hint: ./lab bench-copy --help lists the options'
}

@test "bench-copy: --report without a run says what to do" {
    run "$BENCH" --report --out "$BATS_TEST_TMPDIR/empty"
    assert_failure 2
    assert_line --partial 'no '
    assert_line 'hint: run ./lab bench-copy first'
}
