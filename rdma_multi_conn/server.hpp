/**
 * @file server.hpp
 * @brief Many connections, receiving side: the RDMA CM server loop, over receiving.hpp's CQ and sleep.
 *
 * One loop takes both kinds of news: completions (a client's message, or its failure) and CM events
 * (a client's REQ, its RTU, its DREQ: the switch, serve_cm_event(), is common/multi_receive.cpp, shared
 * with rdma_srq_receive). Chapter 9 walks through it.
 */
#pragma once

#include "receiving.hpp"

#include <rdma_samples/cm.hpp>
#include <rdma_samples/multi_receive.hpp>

#include <utility>
#include <vector>

namespace rdma_multi_conn {

using rdma_samples::Args;
using rdma_samples::CmEventPtr;
using rdma_samples::Device;
using rdma_samples::SenderServer;

/** The CM server: accept up to N senders, take each message as it arrives, survive the ones that fail. */
inline void serve(const Args &args, const Device &dev, const Receiver &receiver)
{
    SenderServer server(args, dev, receiver.qps); // listens; client i gets qps[i] (common/multi_receive.hpp)
    //! [server_loop]
    while (server.serving()) { // -t bounds the wait for each next event, not the whole service
        // 1. Messages: one CQ for all QPs; wc.qp_num names the connection.
        std::vector<ibv_wc> taken = take_completions(receiver);
        server.report(taken);
        // 2. Sleep until a completion or a CM event comes.
        const bool cm_event = sleep_on_channel(receiver, server.fd(), server.left_ms(), taken);
        server.report(taken);
        if (!cm_event)
            continue;
        // 3. Take the CM event (rdma_get_cm_event(); acknowledged when it goes). A sender that went away:
        //    its message may be in the CQ already, so take that first.
        CmEventPtr ev = server.next_event();
        if (SenderServer::ends_connection(*ev))
            server.report(take_completions(receiver));
        // 4. Switch on it: accept, mark up, mark gone (serve_cm_event(), common/src/multi_receive.cpp).
        server.serve(std::move(ev));
    }
    //! [server_loop]
    server.report(take_completions(receiver));
    server.finish();
}

} // namespace rdma_multi_conn
