/**
 * @file server.hpp
 * @brief Many connections, receiving side: the RDMA CM server loop, over receiving.hpp's CQ and sleep.
 *
 * One loop takes both kinds of news: completions (a client's message, or its failure) and CM events
 * (a client's REQ, its RTU, its DREQ). Chapter 9 walks through it; rdma_multi_conn_receive and
 * rdma_srq_receive both serve their clients with it.
 */
#pragma once

#include "receiving.hpp"

#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>

#include <string>
#include <vector>

namespace rdma_samples {

/** Mark what the completions taken mean for each client: its message came, or its receive failed. */
inline void report(const Receiver &receiver, const std::vector<ibv_wc> &taken, CmClients &clients)
{
    for (const ibv_wc &wc : taken) {
        const int conn = connection_of(receiver, wc);
        if (conn < 0)
            continue;
        if (clients.mark_established(conn)) // its message overtook the ESTABLISHED event: the connection is up
            result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
        if (wc.status == IBV_WC_SUCCESS)
            clients.mark_done(conn);
        else
            clients.mark_lost(conn, std::string("its receive completed with ") + wc_status_name(wc.status));
    }
}

/** The CM server: accept up to N senders, take each message as it arrives, survive the ones that fail. */
inline void serve(const Args &args, const Device &dev, const Receiver &receiver)
{
    CmConnection listener = cm_listen(dev, args.listen_port, static_cast<int>(receiver.qps.size()));
    CmClients clients(receiver.qps); // client i gets qps[i]
    info("listening on port %u for %zu senders; waiting up to %d s for each event", args.listen_port,
         receiver.qps.size(), args.timeout_s);
    Deadline idle(args.timeout_s); // -t bounds the wait for each next event, not the whole service
    //! [server_loop]
    while (!clients.all_finished() && !idle.expired()) {
        // 1. Messages: one CQ for all QPs; wc.qp_num names the connection.
        std::vector<ibv_wc> taken = take_completions(receiver);
        report(receiver, taken, clients);
        // 2. Sleep until a completion or a CM event comes.
        const bool cm_event = sleep_on_channel(receiver, listener.channel->fd, idle.left_ms(), taken);
        report(receiver, taken, clients);
        if (!cm_event)
            continue;
        rdma_cm_event *event = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &event), "rdma_get_cm_event");
        CmEventPtr ev(event); // rdma_ack_cm_event() when it goes: every event must be acknowledged
        idle.restart();       // progress: -t again
        const int conn = clients.find(ev->id);
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: { // a sender's REQ, with a new cm_id for its connection
            const int next = clients.admit(ev->id);
            if (next < 0) { // more senders than -nc: refuse (the sender sees REJECTED)
                refuse_request(ev);
                break;
            }
            check_cm_device(ev->id, dev);
            ibv_qp *qp = receiver.qps[static_cast<std::size_t>(next)].get();
            cm_ready_qp(ev->id, qp); // RTR, RTS: its receive waits already
            rdma_conn_param param = cm_conn_param(qp);
            check_rc(rdma_accept(ev->id, &param), "rdma_accept"); // our REP
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED: // the sender's RTU: the connection is up
            if (conn >= 0 && clients.mark_established(conn))
                result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
            break;
        case RDMA_CM_EVENT_DISCONNECTED: // the sender's DREQ, or the CM gave up on it
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            if (conn < 0)
                break;
            report(receiver, take_completions(receiver), clients); // its message may be in the CQ already
            clients.mark_lost(conn,
                              "the sender went away (" + cm_event_name(ev->event) + ") before its message arrived");
            ev.reset();                      // acknowledged before its cm_id goes (answering destroys it)
            clients.mark_disconnected(conn); // answered (DREP) now that its connection is finished
            break;
        default: // TIMEWAIT_EXIT and the like: nothing to do
            break;
        }
    }
    //! [server_loop]
    report(receiver, take_completions(receiver), clients);
    if (receiver.on_async_events)
        receiver.on_async_events(); // the last messages' limit event, if it is queued already
    clients.finish(listener, args.timeout_s, "sender", "messages arrived",
                   "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc",
                   "a sender stopped early; its output says why");
}

} // namespace rdma_samples
