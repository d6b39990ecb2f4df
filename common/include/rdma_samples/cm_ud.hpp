/**
 * @file cm_ud.hpp
 * @brief RDMA CM for unreliable datagrams (rdma_ud): the port space RDMA_PS_UDP, where "connecting"
 * only looks the server's QP up.
 *
 * On RDMA_PS_TCP the CM sets up a connection (REQ, REP, RTU) and both QPs learn each other. On
 * RDMA_PS_UDP there is no connection: rdma_connect() sends a Service ID Resolution request (SIDR REQ),
 * the server's rdma_accept() answers with a SIDR REP carrying its QPN and Q_Key, and the client's
 * RDMA_CM_EVENT_ESTABLISHED hands it `event->param.ud`: the address vector (ah_attr) to build an
 * address handle from, the server's QPN and its Q_Key. The server learns nothing about the client:
 * it meets it in its first datagram's completion (wc.src_qp) and GRH, as rdma-core's udaddy does.
 *
 * Both sides keep their own UD QP (ibv_create_qp(), moved INIT -> RTR -> RTS in the sample); the CM
 * only passes its number. The Q_Key of this port space is fixed: RDMA_UDP_QKEY (rdma_cma.h), so the
 * server's QP must be created with it.
 */
#pragma once

#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>

namespace rdma_samples {

/** @brief What an RDMA CM client learns about the server's UD QP (the ESTABLISHED event's ud param). */
struct CmUdPeer {
    CmConnection cm;          ///< the event channel and the resolved cm_id (destroyed at the end)
    ibv_ah_attr ah_attr{};    ///< the address vector to the server: is_global, GIDs, port (for ibv_create_ah())
    std::uint32_t qp_num = 0; ///< the server's QPN
    std::uint32_t qkey = 0;   ///< the Q_Key its QP accepts (RDMA_UDP_QKEY)
};

/**
 * @brief Client side of `-cm` on RDMA_PS_UDP: resolve the server's address and route (checking they
 * are on our device), send the SIDR request naming our QP, and wait (bounded) for the answer. While
 * nobody answers or listens yet (RDMA_CM_EVENT_UNREACHABLE), it tries again until @p timeout_s runs
 * out: each try is one of cm_retry(), the retry loop of every RDMA CM client.
 * @param server    where to connect (`-sa`, `-sat`, `-lp`)
 * @param timeout_s the bound of the whole lookup (`-t`)
 * @param dev       the device this side opened
 * @param qp        our UD QP (any state)
 * @return the server's address vector, QPN and Q_Key
 */
CmUdPeer cm_ud_connect(const CmServerAddr &server, int timeout_s, const Device &dev, const ibv_qp *qp);

/**
 * @brief Server side of `-cm` on RDMA_PS_UDP: listen on @p port, take one SIDR request (bounded by
 * @p timeout_s) and answer it with @p qp's number. There is no ESTABLISHED event on this side.
 * @param port      the port (`-lp`)
 * @param timeout_s the bound (`-t`)
 * @param dev       the device this side opened
 * @param qp        our UD QP, at RTR with Q_Key RDMA_UDP_QKEY and its receives posted
 * @return the listening and the request's cm_id, to keep until the end
 */
CmConnection cm_ud_accept(std::uint16_t port, int timeout_s, const Device &dev, const ibv_qp *qp);

/**
 * @brief Server side, while it waits for datagrams: answer, without blocking, every further SIDR
 * request on the listening channel with @p qp's number. The reply is a datagram too (a MAD to QP 1):
 * when it is lost, the client's CM sends its request again (about 4 s later), and the kernel hands
 * that to the listener as a new request; unanswered, it would be rejected only when the server exits.
 * @param c  the connection cm_ud_accept() returned
 * @param qp our UD QP
 * @return how many requests were answered now
 */
int cm_ud_answer_again(CmConnection &c, const ibv_qp *qp);

} // namespace rdma_samples
