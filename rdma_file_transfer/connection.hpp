/**
 * @file connection.hpp
 * @brief What both sides of rdma_file_transfer hold once connected: Link, the connection as its
 * completions tell it: messages and credits posted, our SENDs counted until they complete (and the
 * peer named when it never takes them), a refusal that tells the peer why we stop, a QP the peer broke.
 * The QP itself is cm_qp.hpp, the wait events.hpp.
 */
#pragma once

#include "cm_qp.hpp"
#include "events.hpp"
#include "protocol.hpp"

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>

#include <string>

namespace rdma_file_transfer {

/** @brief One side's end of the connection once it is up: the QP, the one message buffer, our SENDs in
 *  flight, and the one wait (events.hpp) with our SENDs' completions taken out of it. */
struct Link {
    Events events;        ///< the CQ, its channel, the CM's channel, both clocks
    ibv_qp *qp;           ///< librdmacm's QP
    ControlMessage *msgs; ///< msgs[0]: where every receive lands; msgs[1]: where our SENDs leave from
    std::uint32_t lkey;   ///< the message buffer's
    int send_depth;       ///< the most SENDs the send queue holds (after the sender's WRITEs)
    int sends = 0;        ///< our SENDs (messages, credits) not yet completed

    /** @brief SEND @p m. @param m the message, fields in host order */
    void post_message(const ControlMessage &m)
    {
        check_room();
        post_send(qp, msgs + 1, lkey, m);
        ++sends;
    }
    /** @brief SEND the credit for @p slot: zero bytes, the slot in the immediate value. @param slot it */
    void post_credit(std::uint32_t slot)
    {
        check_room();
        post_send(qp, nullptr, 0, {}, slot);
        ++sends;
    }
    /** @brief Whether the send queue has room for one more SEND. It is sized for what the protocol allows
     *  in flight, and a SEND leaves it once the peer's receive took it: when it is full, the peer posts
     *  no receives for our SENDs (each waits in Receiver Not Ready retries), or it sent more than the
     *  protocol allows (chunks without waiting for their credits). Either way the peer is at fault,
     *  which ibv_post_send()'s ENOMEM would not say. @throws Error naming the peer */
    void check_room() const
    {
        if (sends >= send_depth)
            throw Error(events.peer + " has not received our last " + std::to_string(sends) +
                            " SENDs (credits and messages): it posts no receives for them, or sends chunks "
                            "without waiting for their credits",
                        events.peer + " does not follow the protocol (rdma_file_transfer version " +
                            std::to_string(protocol_version) + ")");
    }
    /** @brief Give back a receive that a completion consumed (into the one message buffer). */
    void post_receive() { post_receives(qp, 1, msgs, lkey); }
    /** @brief Whether @p wc is one of our SENDs' (a message or a credit): then it is checked and counted.
     *  @param wc a completion @return true for our SEND */
    bool completed_send(const ibv_wc &wc)
    {
        // Every completion passes here first: the first that came back flushed, with none of ours failed
        // before it, is the peer's doing (a flush after the peer's disconnect is checked as before).
        if (wc.status == IBV_WC_WR_FLUSH_ERR && events.peer_state == PeerState::connected)
            throw broken_by_peer();
        if (wc.wr_id != send_wr_id)
            return false;
        rdma_samples::check_wc(wc, IBV_WC_SEND, "our SEND");
        --sends;
        return true;
    }
    /** @brief The next completion that is not one of our SENDs (those are checked and counted on the way):
     *  a receive, checked unless it succeeded (its opcode is known only then). @param what what we wait
     *  for, for errors @return it */
    ibv_wc next(const std::string &what)
    {
        for (;;) {
            const ibv_wc wc = next_completion(events, what);
            if (completed_send(wc))
                continue;
            if (wc.status != IBV_WC_SUCCESS)
                rdma_samples::check_wc(wc, IBV_WC_RECV, "a receive");
            return wc;
        }
    }
    /** @brief Why a work request came back flushed, when none of our own work failed first (an error of
     *  ours would have been reported at its completion): the QP went to the error state on a request of
     *  the peer's, an RDMA WRITE outside the ring, with a wrong rkey, after the ring was deregistered, or
     *  into the sender, whose QP grants no remote access. A NIC says so on the async event queue
     *  (IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_REQ_ERR); Soft-RoCE raises no event for it (measured on
     *  Linux 6.1), so the reason is given either way. @return the error to throw */
    Error broken_by_peer() const
    {
        const std::string reported = rdma_samples::take_async_events(qp->context);
        return Error("our QP went to the error state with no error of our own" +
                         (reported.empty() ? std::string(" and no event from the device")
                                           : " (the device reported: " + reported + ")") +
                         ": " + events.peer +
                         "'s request broke it, an RDMA WRITE outside the memory we granted, with a wrong rkey, or "
                         "after we deregistered it",
                     events.peer + " does not follow the protocol; its output may say more");
    }
    /** @brief Wait until our SENDs are acknowledged, or the peer, which has read them, disconnects; what
     *  else completes is dropped (we are finishing), and a failure ends the wait. */
    void deliver()
    {
        try {
            while (sends > 0)
                completed_send(next_completion(events, "our last SEND to be delivered"));
        } catch (const Error &) {
        }
    }
    /** @brief Tell the peer why we stop (a refusal carrying @p e and its hint), then stop with that
     *  reason. @param e why */
    [[noreturn]] void refuse(const Error &e)
    {
        try {
            post_message(make_message(MessageType::refusal, std::string(e.what()) + "\n" + e.hint()));
            deliver();
        } catch (const Error &) { // (a QP already broken: the peer learns it from its own side)
        }
        throw e;
    }
    /** @brief Do @p step; an Error it throws is refused (refuse()): the peer hears why we stop.
     *  @param step what may fail for a reason the peer must hear @return what @p step returns */
    template <typename Step>
    auto refuse_on_error(Step step) -> decltype(step())
    {
        try {
            return step();
        } catch (const Error &e) {
            refuse(e);
        }
    }
};

} // namespace rdma_file_transfer
