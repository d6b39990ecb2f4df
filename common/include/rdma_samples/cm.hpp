/**
 * @file cm.hpp
 * @brief RDMA CM (librdmacm): connect two queue pairs through an IP address and a port, no files.
 *
 * With descriptor files the two sides swap QPN, PSN and GID by hand and move their QPs INIT -> RTR ->
 * RTS themselves (rdma_write/requester.cpp writes that out). The RDMA Connection Manager does the same
 * exchange over the network, like TCP's connect()/accept():
 *
 *  - the server (no `-sa`) binds a port (`-lp`) and listens; the client (`-sa ADDR`) resolves ADDR to a
 *    local RDMA device and a route, then connects;
 *  - the CM carries each side's QPN and starting PSN in its REQ/REP messages and hands each side the
 *    attributes for RTR and RTS (rdma_init_qp_attr()), so nobody copies a file.
 *
 * librdmacm can also create the QP itself (rdma_create_qp()) and then drive INIT/RTR/RTS inside
 * rdma_connect()/rdma_accept(). These samples keep their own QP, created with ibv_create_qp() on the
 * device they opened, so that the lesson's PD, MR, CQ and QP are the same with or without `-cm`; the CM
 * only fills in what the descriptor files carried, and cm_ready_qp() shows the two ibv_modify_qp() calls.
 *
 * Every wait on the CM is bounded by `-t`: the event channel's file descriptor is polled with a timeout,
 * never a blocking rdma_get_cm_event(). Each failure event (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE,
 * REJECTED, CONNECT_ERROR) becomes an Error with a hint.
 *
 * For the pairs, `-cm` is a few calls: the client posts a DescriptorReceive, calls cm_connect() and
 * waits for the descriptor; the server calls cm_accept() and send_descriptor(); both end with
 * cm_disconnect() (exchange.hpp wraps the first three for the lessons after rdma_write). A server for
 * many clients is cm_server.hpp; `-sa` is read by cm_address.hpp. The event waits and the QP
 * attributes are private to the library (common/src/cm_internal.hpp).
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/device.hpp>

#include <rdma/rdma_cma.h>

#include <memory>
#include <string>

namespace rdma_samples {

/// @cond DELETERS
struct EventChannelDeleter { void operator()(rdma_event_channel *c) const { rdma_destroy_event_channel(c); } };
struct CmIdDeleter { void operator()(rdma_cm_id *id) const { rdma_destroy_id(id); } };
struct CmEventDeleter { void operator()(rdma_cm_event *e) const { rdma_ack_cm_event(e); } };
/// @endcond

using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>; ///< rdma_create_event_channel()
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;                         ///< rdma_create_id()
/** @brief An event taken with rdma_get_cm_event(); acknowledged (rdma_ack_cm_event()) when it goes. */
using CmEventPtr = std::unique_ptr<rdma_cm_event, CmEventDeleter>;

/** @brief One RDMA CM connection: its event channel, the listening id (server) and the connected id. */
struct CmConnection {
    EventChannelPtr channel; ///< where this connection's events arrive
    CmIdPtr listen_id;       ///< the server's listening id (empty on a client)
    CmIdPtr id;              ///< the connected id
    std::string peer;        ///< the other side, as text
    ibv_qp *qp = nullptr;    ///< our QP (not the CM's): cm_disconnect() moves it to ERR
    bool disconnected = false; ///< RDMA_CM_EVENT_DISCONNECTED was seen
};


/**
 * @brief Client side of `-cm`: resolve `-sa` (and its route) to a local device, check it is ours,
 * connect @p qp and wait (bounded) until the server has accepted. @p qp must be in INIT, with any
 * receive it needs already posted: the server may send the moment it has accepted.
 * @param args      the command line (-sa, -sat, -lp, -t)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT
 * @param initiator_depth READs/atomics this side will have in flight at the server (0 when none);
 *                  the server must grant at least this many, or the connection is an error
 * @return the connected connection
 */
CmConnection cm_connect(const Args &args, const Device &dev, ibv_qp *qp, int initiator_depth = 0);

/**
 * @brief Server side of `-cm` for one client: listen on `-lp`, take the first connection request
 * (bounded by -t), move @p qp to RTR and RTS, accept, wait until established.
 * @param args      the command line (-lp, -t)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT, with its receives posted
 * @param responder_resources READs/atomics the client may have in flight at us (0 when none); the
 *                  server grants no more than the client's REQ asked for (its initiator depth), a
 *                  policy: rdma_accept(3) asks only <= max_qp_rd_atom, preferably >= the client's offer
 * @return the accepted connection
 */
CmConnection cm_accept(const Args &args, const Device &dev, ibv_qp *qp, int responder_resources = 0);

/**
 * @brief Orderly goodbye: rdma_disconnect() (the CM sends DREQ; the peer answers DREP), wait, bounded,
 * for RDMA_CM_EVENT_DISCONNECTED, then move our QP to ERR. Either side may start it; both may.
 *
 * rdma_disconnect() moves only a QP that librdmacm created (rdma_create_qp()) to ERR; ours it leaves
 * alone, so we do it. In ERR the QP accepts no more packets and flushes whatever work requests are
 * still posted (IBV_WC_WR_FLUSH_ERR). The samples have none left by then: every request they posted
 * has completed and been polled, so nothing remains to drain before ibv_destroy_qp().
 * @param c         the connection
 * @param timeout_s the bound
 */
void cm_disconnect(CmConnection &c, int timeout_s);

} // namespace rdma_samples
