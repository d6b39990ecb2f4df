/**
 * @file cm_qp.hpp
 * @brief The QP of rdma_file_transfer, as librdmacm makes it (rdma_create_qp()) on its own device
 * context: the context itself (cm_context()), the QP's owner (CmQp), its attributes, what it grants the
 * peer (grant_only()), and the sender's wait for the connection (established()). connection.hpp is the
 * connection once it is up.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
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
    /** @brief Take @p other's QP. @param other a CmQp, left empty */
    CmQp(CmQp &&other) noexcept : id(std::exchange(other.id, nullptr)) {}
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

} // namespace rdma_file_transfer
