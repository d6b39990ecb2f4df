/**
 * @file test_control.hpp
 * @brief The test hooks: the one gate through which the test suites reach inside the programs.
 *
 * A test sometimes needs a program to do what no honest run would: stop at a given step so that it can
 * be killed there, give a completion order a NIC may give but Soft-RoCE never does, pretend its device
 * has no shared receive queue. Each such hook is named in TestHook, documented there, and read only
 * through test_control(), as SQLite's `sqlite3_test_control()` gathers its hooks behind one call: a
 * reader who wants to know what the tests can change in a program reads this file, and a program never
 * reads the environment for a hook by itself.
 *
 * A hook is an environment variable the tests set (tests/bats, tests/stress/stress). Unset, a program
 * behaves exactly as its lesson says. A program that acts on a hook says so in its output, except
 * stop_at_step, which stops it, and step_times, which writes only to its own file.
 */
#pragma once

namespace rdma_samples {

/** @brief The test hooks, each with its environment variable and what it does. */
enum class TestHook {
    /** RDMA_SAMPLES_STOP_AT_STEP=N: raise SIGSTOP at the start of step N, so that a test can kill the
     *  program at exactly that point of its lesson (tests/stress/stress --kill; log.cpp). */
    stop_at_step,
    /** RDMA_SAMPLES_TEST_LINGER_MS=MS: a responder keeps its QP MS ms after its last message instead of
     *  the retransmission window (on one device no ACK is lost; rc_qp.cpp, linger_ms()). */
    linger_ms,
    /** RDMA_SAMPLES_TEST_REORDER_CQ=MS: every first wait sleeps MS ms, then keeps what the CQ holds
     *  newest first: the order a late ACK gives on a NIC (completions.cpp). */
    reorder_cq,
    /** RDMA_SAMPLES_TEST_MAX_SRQ=N: the device reports N shared receive queues (0: none;
     *  rdma_multi_conn's receiver). */
    max_srq,
    /** RDMA_SAMPLES_TEST_FILE_FAULT=corrupt|version=N|pause=MS|busy=MS: rdma_file_sender corrupts a chunk,
     *  speaks protocol version N, or pauses MS ms after each chunk; rdma_file_receiver sleeps MS ms after
     *  each chunk it takes (rdma_file_transfer/support/test_fault.hpp). */
    file_fault,
    /** RDMA_SAMPLES_TEST_MAX_MR_SIZE=BYTES: the device reports max_mr_size BYTES (Soft-RoCE reports 2^64 - 1,
     *  so no size reaches its own limit; rdma_memory_register). */
    max_mr_size,
    /** RDMA_SAMPLES_TEST_STEP_TIMES=FILE: every step() also appends its line to FILE after the time it
     *  was announced (CLOCK_REALTIME, "SECONDS.NANOSECONDS step N: ..."): ./lab trace --json places the
     *  program's steps beside the packets they caused (trace/README.md; log.cpp). */
    step_times,
};

/**
 * @brief The setting the tests gave a hook.
 * @param hook which hook
 * @return its value, or nullptr when the tests did not set it (every normal run)
 */
const char *test_control(TestHook hook);

/**
 * @brief The setting the tests gave a numeric hook.
 * @param hook     which hook
 * @param fallback the value when the hook is unset or empty
 * @return the number (as atoi reads it), or @p fallback
 */
int test_control_int(TestHook hook, int fallback);

/**
 * @brief The environment variable that sets a hook, for a program's message that it acted on one.
 * @param hook which hook
 * @return e.g. "RDMA_SAMPLES_TEST_LINGER_MS"
 */
const char *test_control_name(TestHook hook);

} // namespace rdma_samples
