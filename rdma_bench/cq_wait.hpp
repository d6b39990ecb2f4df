/**
 * @file cq_wait.hpp
 * @brief How rdma_bench waits: busy polling or a completion channel, batch polling, and the send
 * queue's bookkeeping under selective signaling. Both sides use these; the chapter quotes them.
 */
#pragma once

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/cq_channel.hpp>
#include <rdma_samples/wait.hpp>

#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdma_bench {

/** @brief What to check when a wait of the bench runs out (its own -t clock: rdma_samples::Deadline). */
inline constexpr const char *timeout_hint =
    "the peer may be gone, stopped, or started with other --op/--mode/--size/--iters; check its output, or raise -t";

/** @brief Takes completions from one CQ, busy polling or sleeping on a channel; every wait ends by -t. */
class CompletionWaiter {
public:
    /**
     * @param cq        the completion queue
     * @param channel   its completion channel (--events), or nullptr to busy poll
     * @param batch     completions taken per ibv_poll_cq() call (--poll-batch)
     * @param timeout_s how long one wait may last (-t)
     * @param yield     busy polling yields the CPU every 1024 empty polls (false: --no-yield)
     */
    CompletionWaiter(ibv_cq *cq, ibv_comp_channel *channel, std::uint32_t batch, int timeout_s, bool yield = true)
        : cq_(cq), channel_(channel), wc_(batch), timeout_s_(timeout_s), yield_(yield)
    {}
    /** @brief Wait for at least one completion. @param what what is awaited, for the timeout message
     *  @return how many were taken (1..batch), in wc() */
    int wait(const char *what)
    {
        if (!early_.empty()) { // (adopt(): polled by the set-up before the loop began)
            const std::size_t n = std::min(early_.size(), wc_.size());
            std::copy_n(early_.begin(), n, wc_.begin());
            early_.erase(early_.begin(), early_.begin() + static_cast<std::ptrdiff_t>(n));
            return static_cast<int>(n);
        }
        std::optional<rdma_samples::Deadline> deadline; // the clock is read only once the CQ has been empty a while
        for (std::uint64_t empty = 1;; ++empty) {
            //! [batch_poll]
            // Batch polling: one call takes up to wc_.size() completions. Each ibv_poll_cq() locks the
            // CQ and reads its ring; taking 16 at once pays that once for 16 work requests.
            int taken = rdma_samples::check_poll(ibv_poll_cq(cq_, static_cast<int>(wc_.size()), wc_.data()));
            //! [batch_poll]
            if (taken > 0)
                return taken;
            if (channel_ == nullptr) {
                //! [busy_poll]
                // Busy polling: ask again at once. The answer comes as soon as it exists, at the price of
                // a CPU spinning at 100%. Every 1024 empty polls look at the clock (-t bounds the wait)
                // and yield, so a peer that shares our CPU can still run (not with --no-yield: perftest
                // spins without yielding, which is right when each process has a CPU of its own).
                if (empty % 1024 == 0) {
                    if (!deadline)
                        deadline.emplace(timeout_s_);
                    else if (deadline->expired())
                        throw timeout(what);
                    if (yield_)
                        sched_yield();
                }
                //! [busy_poll]
                continue;
            }
            //! [event_wait]
            // Completion channel: arm the CQ for its NEXT completion, poll once more (a completion that
            // came before the arm raises no event), and only then sleep on the channel's fd, bounded by
            // -t; the event is taken and acknowledged there (common/cq_channel.hpp, written out in chapter 9).
            taken = rdma_samples::arm_cq_and_poll(cq_, wc_);
            if (taken > 0)
                return taken; // (the armed event fires later; the next wait consumes it)
            if (!deadline)
                deadline.emplace(timeout_s_);
            const int ready = rdma_samples::sleep_on_cq_channel(channel_, {}, deadline->left_ms());
            if (ready == 0 && deadline->expired())
                throw timeout(what);
            //! [event_wait]
        }
    }

    /**
     * @brief Take over the completions of @p wr_id that the set-up's waits polled and kept. The set-up
     * waits by wr_id (rdma_samples::Completions) for its own requests, such as our descriptor's SEND,
     * whose ACK may be lost and resent: meanwhile the peer's first messages (a ping, a SEND, its goodbye)
     * may complete, and are kept there. The next wait() returns them first, in the order they were polled.
     * @param kept  the set-up's completions
     * @param wr_id the wr_id of the receives this loop takes
     */
    void adopt(rdma_samples::Completions &kept, std::uint64_t wr_id)
    {
        ibv_wc wc{};
        while (kept.take(wr_id, wc))
            early_.push_back(wc);
    }

    /** @brief The bound of one wait. @return -t, in seconds */
    int timeout_s() const { return timeout_s_; }
    /** @brief Whether busy polling yields the CPU now and then. @return false with --no-yield */
    bool yields() const { return yield_; }

    /** @brief A completion taken by the last wait(). @param i 0..n-1 @return it */
    const ibv_wc &wc(int i) const { return wc_[static_cast<std::size_t>(i)]; }

private:
    // The samples' timeout error, with the asynchronous events that explain why nothing completed (a
    // QP that broke, a CQ that overflowed, a port that went down).
    rdma_samples::Error timeout(const char *what) const
    {
        return rdma_samples::with_async_events(rdma_samples::timeout_error(timeout_s_, what, timeout_hint),
                                               cq_->context);
    }
    ibv_cq *cq_;
    ibv_comp_channel *channel_;
    std::vector<ibv_wc> wc_;
    std::vector<ibv_wc> early_; // adopted completions not returned yet
    int timeout_s_;
    bool yield_;
};

//! [send_queue]
/**
 * @brief The send queue's bookkeeping under selective signaling.
 *
 * A send work request holds its slot in the send queue until a completion for it, or for a LATER
 * request, is polled. With --cq-mod N only every N-th request asks for a completion
 * (IBV_SEND_SIGNALED); when one arrives, it frees its own slot and those of the unsignaled requests
 * before it (completions of one QP come in order). So wr_id carries the request's running number, and
 * a completion with wr_id k says: requests 0..k are done. At least one request in every max_send_wr
 * must be signaled, or the queue fills with requests nothing will ever free.
 */
struct SendQueue {
    std::uint64_t posted = 0; ///< requests posted so far
    std::uint64_t done = 0;   ///< requests known complete
    std::uint32_t depth;      ///< max_send_wr (--tx-depth)
    std::uint32_t cq_mod;     ///< signal every cq_mod-th request (--cq-mod)
    /** @brief Free slots. @return depth - in flight */
    std::uint32_t room() const { return depth - static_cast<std::uint32_t>(posted - done); }
    /** @brief Whether request number @p i (counted from @p first, the phase's first) is signaled.
     *  @param i the request's number @param first the phase's first number @param last the phase's last
     *  @return true for every cq_mod-th and for the last */
    bool signaled(std::uint64_t i, std::uint64_t first, std::uint64_t last) const
    {
        return (i - first + 1) % cq_mod == 0 || i == last;
    }
    /** @brief A signaled completion arrived. @param wc it (wr_id = the request's number) */
    void completed(const ibv_wc &wc) { done = wc.wr_id + 1; }
};
//! [send_queue]

/**
 * @brief Busy-wait until the byte at @p byte holds @p tag: how a WRITE ping-pong notices the peer's
 * WRITE, which gives this side no completion. Bounded by @p timeout_s.
 * @param byte the last byte of the message @param tag the value it will hold @param timeout_s -t
 * @param yield yield the CPU every 1024 spins (false: --no-yield)
 */
inline void wait_for_byte(const volatile char *byte, char tag, int timeout_s, bool yield)
{
    std::optional<rdma_samples::Deadline> deadline; // (as CompletionWaiter: the clock only after 1024 spins)
    for (std::uint64_t spins = 1; *byte != tag; ++spins)
        if (spins % 1024 == 0) {
            if (!deadline)
                deadline.emplace(timeout_s);
            else if (deadline->expired())
                throw rdma_samples::timeout_error(timeout_s, "the peer's WRITE to arrive", timeout_hint);
            if (yield)
                sched_yield();
        }
}

} // namespace rdma_bench
