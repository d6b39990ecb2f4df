/**
 * @file wait.hpp
 * @brief The `-t` clock: every wait in the samples (a peer's file, a completion, a CM event) is bounded.
 *
 * This is the lowest piece of the common library after check.hpp: descriptor files, completions, RDMA
 * CM and rdma_bench all take their deadlines from here, so "-t" means the same thing everywhere.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <string>

namespace rdma_samples {

/** @brief A point in time @p timeout_s seconds from when it was made (or last restarted). */
class Deadline {
public:
    /** @param timeout_s the bound, in seconds (-t) */
    explicit Deadline(int timeout_s);
    /** @brief A short deadline, for one step of a longer wait.
     *  @param ms milliseconds from now
     *  @return the deadline */
    static Deadline in_ms(int ms);
    /** @brief Whether the time is up.
     *  @return true once the deadline has passed */
    bool expired() const;
    /** @brief What is left, for poll() and friends.
     *  @return milliseconds until the deadline, 0 once it has passed */
    int left_ms() const;
    /** @brief The full bound again from now: progress was made. */
    void restart();
    /** @brief The bound this deadline was made with.
     *  @return seconds */
    int timeout_s() const { return timeout_s_; }

private:
    long long at_ns_;
    int timeout_s_;
    long long span_ns_;
};

/**
 * @brief The error of a wait that ran out: "timed out after N s waiting for WHAT", with a hint.
 * @param timeout_s the bound that ran out
 * @param what      what was waited for
 * @param hint      what to check; empty for the general one (the peer may be gone; raise -t)
 * @return the Error to throw
 */
Error timeout_error(int timeout_s, const std::string &what, const std::string &hint = {});

/**
 * @brief Bounded polling: pause() between empty polls, and throw once the deadline has passed.
 *
 * The first few pauses only yield; later ones sleep a little, so that two peers polling on one CPU
 * (Soft-RoCE does its work in the kernel, on the same CPU) do not starve each other: 200 us during
 * the first half second of the wait, 5 ms until 2 s, then 50 ms (a peer still starting, or gone),
 * never past the deadline.
 */
class Waiter {
public:
    /**
     * @param timeout_s the bound
     * @param what      what is waited for, for the timeout message
     * @param hint      what to check on timeout
     */
    Waiter(int timeout_s, std::string what, std::string hint = {});
    /**
     * @brief A wait for a completion: on timeout, the message also names the asynchronous events the
     * device reported (a QP that broke, a CQ that overflowed, a port that went down), which explain
     * why nothing completed.
     * @param timeout_s the bound
     * @param what      what is waited for, for the timeout message
     * @param device    the device whose events to name
     */
    Waiter(int timeout_s, std::string what, ibv_context *device);
    /** @brief Yield or sleep briefly; throws timeout_error() once the time is up. */
    void pause();

private:
    Deadline deadline_;
    unsigned polls_ = 0;
    std::string what_;
    std::string hint_;
    ibv_context *device_ = nullptr;
};

} // namespace rdma_samples
