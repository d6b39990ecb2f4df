/**
 * @file test_control.cpp
 * @brief The test hooks' environment variables, read in one place (test_control.hpp).
 */
#include <rdma_samples/test_control.hpp>

#include <cstdlib>

namespace rdma_samples {

const char *test_control_name(TestHook hook)
{
    switch (hook) {
    case TestHook::stop_at_step: return "RDMA_SAMPLES_STOP_AT_STEP";
    case TestHook::linger_ms: return "RDMA_SAMPLES_TEST_LINGER_MS";
    case TestHook::reorder_cq: return "RDMA_SAMPLES_TEST_REORDER_CQ";
    case TestHook::max_srq: return "RDMA_SAMPLES_TEST_MAX_SRQ";
    case TestHook::file_fault: return "RDMA_SAMPLES_TEST_FILE_FAULT";
    case TestHook::max_mr_size: return "RDMA_SAMPLES_TEST_MAX_MR_SIZE";
    case TestHook::step_times: return "RDMA_SAMPLES_TEST_STEP_TIMES";
    }
    return "";
}

const char *test_control(TestHook hook)
{
    return std::getenv(test_control_name(hook));
}

int test_control_int(TestHook hook, int fallback)
{
    const char *v = test_control(hook);
    return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

} // namespace rdma_samples
