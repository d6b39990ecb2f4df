/** @file wait.cpp @brief The `-t` clock: deadlines, and bounded waiting that gives the CPU away between polls. */
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/wait.hpp>

#include <sched.h>

#include <algorithm>
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

Deadline::Deadline(int timeout_s)
    : at_ns_(0), timeout_s_(timeout_s), span_ns_(static_cast<long long>(timeout_s) * 1'000'000'000LL)
{
    restart();
}

Deadline Deadline::in_ms(int ms)
{
    Deadline d(0);
    d.span_ns_ = static_cast<long long>(ms) * 1'000'000LL;
    d.restart();
    return d;
}

bool Deadline::expired() const
{
    return now_ns() >= at_ns_;
}

int Deadline::left_ms() const
{
    // Rounded up: a poll() given what is left must not wake before the deadline, or a caller that
    // then asks expired() would see a wait that ran out with time still on the clock.
    const long long left = (at_ns_ - now_ns() + 999'999) / 1'000'000;
    return left > 0 ? static_cast<int>(left) : 0;
}

void Deadline::restart()
{
    at_ns_ = now_ns() + span_ns_;
}

Error timeout_error(int timeout_s, const std::string &what, const std::string &hint)
{
    return Error("timed out after " + std::to_string(timeout_s) + " s waiting for " + what,
                 hint.empty() ? "the peer may be gone, stopped or not started; check its output, or raise -t" : hint);
}

Waiter::Waiter(int timeout_s, std::string what, std::string hint)
    : deadline_(timeout_s), what_(std::move(what)), hint_(std::move(hint))
{}

Waiter::Waiter(int timeout_s, std::string what, ibv_context *device)
    : deadline_(timeout_s), what_(std::move(what)), device_(device)
{}

void Waiter::pause()
{
    if (deadline_.expired())
        throw device_ != nullptr ? with_async_events(timeout_error(deadline_.timeout_s(), what_, hint_), device_)
                                 : timeout_error(deadline_.timeout_s(), what_, hint_);
    // A few polls back to back catch a completion that is about to arrive; after that, give the CPU
    // away: Soft-RoCE processes packets in the kernel on the same CPUs, and a peer may share our core.
    if (++polls_ < 64) {
        sched_yield();
        return;
    }
    // The longer the wait, the longer the nap: what has not come within 2 s is a peer still starting,
    // slow or gone, not a packet in flight, and it is noticed at most 50 ms late. (A responder left
    // waiting -t 10 for a requester that never came, its files on the test VM's shared folder, where
    // each poll is a round trip to the host, took about 4 s of emulated CPU; now about 2: see
    // tests/results.md.) Never past the deadline.
    const long long left_ms = deadline_.left_ms(), waited_ms = deadline_.timeout_s() * 1000LL - left_ms;
    const long long nap_us = waited_ms < 500 ? 200 : waited_ms < 2000 ? 5'000 : 50'000;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(nap_us, left_ms * 1000LL)));
}

} // namespace rdma_samples
