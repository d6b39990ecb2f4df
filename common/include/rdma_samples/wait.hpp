/**
 * @file wait.hpp
 * @brief The `-t` clock: every wait in the samples (a peer's file, a completion, a CM event) is bounded.
 */
#pragma once

#include <string>

namespace rdma_samples {

/**
 * @brief Bounded waiting: pause() between empty polls, and throw once @p timeout_s has passed.
 *
 * The first few pauses only yield; later ones sleep a little, so that two peers polling on one CPU
 * (Soft-RoCE does its work in the kernel, on the same CPU) do not starve each other.
 */
class Waiter {
public:
    /**
     * @param timeout_s the bound
     * @param what      what is waited for, for the timeout message
     * @param hint      what to check on timeout
     */
    Waiter(int timeout_s, std::string what, std::string hint = {});
    /** @brief Yield or sleep briefly; throws Error once the time is up. */
    void pause();

private:
    long long deadline_ns_;
    int timeout_s_;
    unsigned polls_ = 0;
    std::string what_;
    std::string hint_;
};

} // namespace rdma_samples
