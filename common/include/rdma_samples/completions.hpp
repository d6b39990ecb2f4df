/**
 * @file completions.hpp
 * @brief Find a work request's completion by its wr_id, on a CQ that several work queues share.
 *
 * Completions come back in order within one work queue: a QP's send queue returns its completions in
 * the order the requests were posted, and so does its receive queue. Between two work queues there is
 * no order at all. When one CQ serves a QP's send queue and its receive queue (as in every sample
 * here), the peer's next message can complete before our own SEND does: our SEND completes only when
 * its ACK arrives, and an ACK may be late (a lost packet and a retransmit, a NIC that coalesces ACKs,
 * a lossy RoCE network), while the peer, which already has our message, answers at once.
 *
 * So a wait names the work request it waits for, by the wr_id it was posted with, and a completion of
 * another request that turns up first is kept until somebody waits for it. (The other way out is one
 * CQ per work queue; the samples keep one CQ, the common case in real programs.)
 *
 * The sorting is pure (keep(), take(), no device), and tests/unit/test_completions.cpp feeds it
 * completions in both orders. rdma_write's requester writes the poll loop out around take() and keep()
 * (chapter 2, "Poll for the completion"); every other wait in the samples is that loop as one call:
 * wait(), or poll_for() where the lesson looks at the status itself.
 */
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace rdma_samples {

/// @name wr_ids of the work requests the common library posts
/// The samples number their own work requests from 1.
/// @{
inline constexpr std::uint64_t goodbye_wr_id = 0x600d;    ///< the zero-length goodbye SEND and its receive
inline constexpr std::uint64_t descriptor_wr_id = 0xde5c; ///< -cm: the SEND of our resource descriptor
/// -cm: the receive of the peer's resource descriptor. Not the SEND's wr_id: a side that sends a
/// descriptor and receives one (rdma_bench) must not take the peer's for its own SEND's completion.
inline constexpr std::uint64_t descriptor_recv_wr_id = 0xde5d;
/// @}

/** @brief The completions of one CQ, sorted by wr_id. */
class Completions {
public:
    /** @param cq the completion queue that every wait polls */
    explicit Completions(ibv_cq *cq) : cq_(cq) {}

    /**
     * @brief Wait, bounded by @p timeout_s, for the completion of work request @p wr_id, and check it.
     *
     * Polls the CQ; a completion with another wr_id is kept for a later wait. If the request was
     * flushed (IBV_WC_WR_FLUSH_ERR: the QP had already failed), the error names the first failed
     * completion seen instead, which holds the cause. On a timeout or a failed completion, the
     * message also names the asynchronous events the device reported (QP fatal, CQ error, port down).
     * @param wr_id     the wr_id the work request was posted with
     * @param expected  the opcode its completion must have
     * @param timeout_s give up after this many seconds
     * @param what      what the work request was, for messages, e.g. "the RDMA READ"
     * @return the completion
     */
    ibv_wc wait(std::uint64_t wr_id, ibv_wc_opcode expected, int timeout_s, const std::string &what);

    /**
     * @brief The poll loop of chapter 2 as one call: wait, bounded by @p timeout_s, for the completion
     * of work request @p wr_id, keeping any other completion for a later wait. Not checked: for a
     * lesson that looks at the status itself (wait() is this, then check()).
     * @param wr_id     the wr_id the work request was posted with
     * @param timeout_s give up after this many seconds
     * @param what      what the work request was, for the timeout message
     * @param hint      what to check on a timeout; empty: the general one, with the device's
     *                  asynchronous events named
     * @return the completion, whatever its status
     */
    ibv_wc poll_for(std::uint64_t wr_id, int timeout_s, const std::string &what, const std::string &hint = {});

    /**
     * @brief Keep a completion that nobody waits for yet.
     * @param wc a completion just polled
     */
    void keep(const ibv_wc &wc) { kept_.push_back(wc); }

    /**
     * @brief The samples' poll loop asks this first: has the completion of @p wr_id been polled yet?
     *
     *     while (!completions.take(1, wc))
     *         if (check_poll(ibv_poll_cq(cq, 1, &wc)) == 1)
     *             completions.keep(wc);
     *         else
     *             waiter.pause();
     * @param wr_id the work request waited for
     * The oldest kept one is taken when several share the wr_id (a request posted again).
     * @param wc    set to its completion when it has been polled
     * @return true when it has (and it is no longer kept)
     */
    bool take(std::uint64_t wr_id, ibv_wc &wc);

    /**
     * @brief Check a completion the poll loop found: its status must be IBV_WC_SUCCESS and its opcode
     * @p expected (check_wc()). A flushed one (IBV_WC_WR_FLUSH_ERR: its QP had failed before it ran)
     * is reported through the first failed completion of the same QP polled so far, which holds the
     * cause; the device's asynchronous events, if any, are named too.
     * @param wc       the completion
     * @param expected the opcode it must have
     * @param what     what the work request was, for messages, e.g. "the RDMA READ"
     */
    void check(const ibv_wc &wc, ibv_wc_opcode expected, const std::string &what) const;

    /**
     * @brief The first kept completion that failed with a status other than a flush: the cause of the
     * flushes that follow it.
     * @return the completion, or nothing
     */
    std::optional<ibv_wc> first_error() const;

    /** @brief How many completions are kept.
     *  @return the count */
    std::size_t kept() const { return kept_.size(); }

    /** @brief The CQ.
     *  @return the CQ this object polls */
    ibv_cq *cq() const { return cq_; }

private:
    ibv_cq *cq_;
    std::deque<ibv_wc> kept_;
    std::optional<std::uint64_t> reordered_for_; // the test hook's last wr_id (see completions.cpp)
};

} // namespace rdma_samples
