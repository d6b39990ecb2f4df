/**
 * @file test_fault.hpp
 * @brief The file transfer's one test hook (RDMA_SAMPLES_TEST_FILE_FAULT, through the project's one gate,
 * test_control()): faults the tests inject on purpose, each a branch of one side's one flow.
 */
#pragma once

#include "../protocol.hpp"

#include <rdma_samples/test_control.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace rdma_file_transfer {

/**
 * @brief Test-only fault injection, read once from RDMA_SAMPLES_TEST_FILE_FAULT; never set it in real
 * use. "corrupt": the sender flips one byte of the first chunk after hashing it (the receiver's digest
 * then differs); "version=N": the sender announces protocol version N; "pause=MS": the sender sleeps
 * MS milliseconds after each chunk it posts (so a test can change the file or kill a side midway);
 * "busy=MS": the receiver sleeps MS milliseconds after each chunk it takes, so that the next chunks are
 * always waiting in its CQ (a receiver kept busy: its clocks must be read all the same).
 */
struct TestFault {
    bool corrupt = false;                     ///< flip a byte of the first chunk
    std::uint16_t version = protocol_version; ///< the version to announce
    int pause_ms = 0;                         ///< sleep after each chunk (the sender)
    int busy_ms = 0;                          ///< sleep after each chunk taken (the receiver)
};

/** @brief The test hook's setting (see TestFault), read at the first call. @return it */
inline const TestFault &test_fault()
{
    static const TestFault fault = [] {
        TestFault f;
        const char *v = rdma_samples::test_control(rdma_samples::TestHook::file_fault);
        const std::string s = v != nullptr ? v : "";
        if (s == "corrupt")
            f.corrupt = true;
        else if (s.rfind("version=", 0) == 0)
            f.version = static_cast<std::uint16_t>(std::atoi(s.c_str() + 8));
        else if (s.rfind("pause=", 0) == 0)
            f.pause_ms = std::atoi(s.c_str() + 6);
        else if (s.rfind("busy=", 0) == 0)
            f.busy_ms = std::atoi(s.c_str() + 5);
        return f;
    }();
    return fault;
}

/** @brief Sleep @p ms milliseconds where a test asked for it (TestFault's pause_ms, busy_ms); at once when 0.
 *  @param ms the hook's setting */
inline void test_sleep(int ms)
{
    if (ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

} // namespace rdma_file_transfer
