/**
 * @file connection.hpp
 * @brief What both sides of rdma_file_transfer hold: the QP that librdmacm makes (rdma_create_qp()) on
 * its own device context, the sender's wait for it to be connected (established()), and Link, the
 * connection as its completions tell it: messages and credits posted, our SENDs counted until they
 * complete, a refusal that tells the peer why we stop. The wait itself is events.hpp.
 */
#pragma once

#include "events.hpp"
#include "protocol.hpp"

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <rdma/rdma_cma.h>

#include <string>
#include <utility>

namespace rdma_file_transfer {

using rdma_samples::check;
using rdma_samples::check_rc;
using rdma_samples::Error;

/** @brief librdmacm's own context of @p dev (rdma_get_devices()): every cm_id on that device has it as
 *  id->verbs, so a PD or CQ made on it serves every connection attempt. @param dev the device -d opened
 *  @return the context (librdmacm's, never closed by us) */
inline ibv_context *cm_context(const rdma_samples::Device &dev)
{
    int n = 0;
    ibv_context **list = check(rdma_get_devices(&n), "rdma_get_devices");
    ibv_context *found = nullptr;
    for (int i = 0; i < n; ++i)
        if (dev.name == ibv_get_device_name(list[i]->device))
            found = list[i];
    rdma_free_devices(list); // the list, not the contexts: librdmacm keeps those
    if (found == nullptr)
        throw Error("librdmacm does not know " + dev.name,
                    "check rdma link show: is the device bound to a network interface?");
    return found;
}

/** @brief The QP librdmacm made on a cm_id (rdma_create_qp()); rdma_destroy_qp() when it goes, which
 *  must be before the cm_id goes. */
struct CmQp {
    rdma_cm_id *id = nullptr; ///< the cm_id that owns the QP (id->qp)
    CmQp() = default;
    /** @brief Hold @p owner's QP. @param owner a cm_id with a QP */
    explicit CmQp(rdma_cm_id *owner) : id(owner) {}
    CmQp(const CmQp &) = delete;
    CmQp &operator=(const CmQp &) = delete;
    /** @brief Take @p other's QP (destroying ours, if any). @param other a CmQp, left empty @return *this */
    CmQp &operator=(CmQp &&other) noexcept
    {
        reset(std::exchange(other.id, nullptr));
        return *this;
    }
    ~CmQp() { reset(nullptr); }
    /** @brief Destroy the QP held so far (if any), then hold @p owner's. @param owner a cm_id with a QP, or nullptr */
    void reset(rdma_cm_id *owner)
    {
        if (id != nullptr)
            rdma_destroy_qp(id);
        id = owner;
    }
};

/** @brief An RC QP's attributes for rdma_create_qp(): one CQ for both queues, one SGE per work request,
 *  nothing inline. @param cq the CQ @param max_send_wr,max_recv_wr the queues' depths @return them */
inline ibv_qp_init_attr qp_init_attr(ibv_cq *cq, std::uint32_t max_send_wr, std::uint32_t max_recv_wr)
{
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap = {.max_send_wr = max_send_wr,
                .max_recv_wr = max_recv_wr,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = 0};
    return init;
}

/** @brief Grant the peer exactly what the protocol needs of our QP: librdmacm's connect grants remote
 *  write to every RC QP it connects (and remote read and atomics with responder resources), where the
 *  receiver's QP needs remote write alone (the chunks, into its ring) and the sender's none. The memory
 *  regions decide as well (the sender registers none for remote access); this is the QP's own half.
 *  @param qp the QP, in RTS @param access the IBV_ACCESS_REMOTE_* flags to keep */
inline void grant_only(ibv_qp *qp, unsigned access)
{
    ibv_qp_attr attr{};
    attr.qp_access_flags = access;
    check_rc(ibv_modify_qp(qp, &attr, IBV_QP_ACCESS_FLAGS), "ibv_modify_qp(access flags)");
}

/** @brief The sender's wait, in a try of cm_retry(), for the receiver's answer to rdma_connect() on a
 *  QP of librdmacm's: true once RDMA_CM_EVENT_ESTABLISHED came; false, with CmTry::not_yet saying why,
 *  while nobody listens yet (cm_nobody_listens()) or nobody answers, for cm_retry() to try
 *  again; any other event throws. @param this_try the try @param timeout_s -t, for messages @return it */
inline bool established(rdma_samples::CmTry &this_try, int timeout_s)
{
    if (!rdma_samples::cm_event_ready(this_try.conn.channel.get(), this_try.deadline.left_ms())) {
        this_try.not_yet = rdma_samples::timeout_error(timeout_s, "the receiver to accept",
                                                       "is rdma_file_receiver running on " + this_try.conn.peer + "?");
        return false;
    }
    rdma_cm_event *raw = nullptr;
    check_rc(rdma_get_cm_event(this_try.conn.channel.get(), &raw), "rdma_get_cm_event");
    const rdma_samples::CmEventPtr ev(raw);
    if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
        return true;
    if (!rdma_samples::cm_nobody_listens(*ev)) {
        const std::string why = rdma_samples::cm_reject_reason(*ev); // a receiver that refused says why
        throw Error("RDMA CM: " + rdma_samples::cm_event_name(ev->event) + " (status " + std::to_string(ev->status) +
                        ") from " + this_try.conn.peer + (why.empty() ? "" : ": " + rdma_samples::quote(why, 100)),
                    "is rdma_file_receiver there, with the same -lp, serving nobody else?");
    }
    this_try.not_yet = Error("nobody listens on " + this_try.conn.peer + " (RDMA_CM_EVENT_REJECTED, status " +
                                 std::to_string(ev->status) + ")",
                             "start rdma_file_receiver there (with the same -lp), or raise -t");
    this_try.refused = true;
    return false;
}

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
