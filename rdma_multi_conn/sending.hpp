/**
 * @file sending.hpp
 * @brief Many connections, sending side: the SEND each connection posts from the one registered message,
 * and the completions that say which connection each finished on (wr_id). sender.cpp's RDMA CM server
 * loop takes them as they come; receiving.hpp is the other side's.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace rdma_multi_conn {

using rdma_samples::Args;
using rdma_samples::Buffer;
using rdma_samples::check_poll;
using rdma_samples::check_post;
using rdma_samples::CmClients;
using rdma_samples::result;

/** Post the message as a SEND on @p qp; @p conn comes back as the completion's wr_id. */
inline void post_message(ibv_qp *qp, const Buffer &buf, const ibv_mr *mr, std::size_t len, int conn)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // all connections send from the same bytes
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(conn); // tells the completions apart (wc.qp_num would too)
    wr.opcode = IBV_WR_SEND;                     // two-sided: lands in the receive the peer posted
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp, &wr, &bad_wr), "ibv_post_send(SEND, connection " + std::to_string(conn) + ")");
}

/** Take every completion the CQ holds; wr_id is the connection. */
inline void take_completions(ibv_cq *cq, const Args &args, CmClients &clients)
{
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(cq, 1, &wc)) > 0) {
        const int conn = static_cast<int>(wc.wr_id);
        if (wc.status == IBV_WC_SUCCESS) {
            result("Sender has sent: \"%s\", connection %d", args.message.c_str(), conn);
            clients.mark_done(conn);
        } else {
            clients.mark_lost(conn, std::string("its SEND completed with ") + rdma_samples::wc_status_name(wc.status) +
                                        ": " + rdma_samples::hint_for_wc_status(wc.status));
        }
    }
}

} // namespace rdma_multi_conn
