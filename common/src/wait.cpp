/** @file wait.cpp @brief The `-t` clock: bounded waiting that gives the CPU away between polls. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/wait.hpp>

#include <sched.h>

#include <chrono>
#include <thread>

namespace rdma_samples {

namespace {
long long now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
} // namespace

Waiter::Waiter(int timeout_s, std::string what, std::string hint)
    : deadline_ns_(now_ns() + static_cast<long long>(timeout_s) * 1'000'000'000LL), timeout_s_(timeout_s),
      what_(std::move(what)), hint_(std::move(hint))
{
}

void Waiter::pause()
{
    if (now_ns() >= deadline_ns_)
        throw Error("timed out after " + std::to_string(timeout_s_) + " s waiting for " + what_,
                    hint_.empty() ? "the peer may be gone, stopped or not started; check its output, or raise -t"
                                  : hint_);
    // A few polls back to back catch a completion that is about to arrive; after that, give the CPU
    // away: Soft-RoCE processes packets in the kernel on the same CPUs, and a peer may share our core.
    if (++polls_ < 64)
        sched_yield();
    else
        std::this_thread::sleep_for(std::chrono::microseconds(polls_ < 2000 ? 200 : 5000));
}

} // namespace rdma_samples
