/**
 * @file receiving.hpp
 * @brief Many connections, receiving side: N QPs on one CQ, a sleep on its completion channel, the RDMA
 * CM server loop.
 *
 * rdma_multi_conn_receive (a receive posted on each QP) and rdma_srq_receive (one shared receive queue
 * for all) differ only in where their receives wait: both take their messages here. A completion names
 * its connection by wc.qp_num and its buffer slot by wc.wr_id; the program's on_message prints the
 * message (and, with an SRQ, gives the slot back). Chapter 9 walks through the loop.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <functional>
#include <string>
#include <vector>

namespace rdma_samples {

/** What the receiving loop needs: the CQ all QPs share, its channel, the QPs, and what to do with a message. */
struct Receiver {
    ibv_context *ctx;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    const std::vector<QpPtr> &qps;
    /// Called as each successful completion is taken: print the message in slot wc.wr_id (an SRQ also
    /// posts the slot again at once).
    std::function<void(const ibv_wc &wc, int connection)> on_message;
    /// Called when the device's async fd has events (an SRQ's limit event); empty: the fd is not watched.
    std::function<void()> on_async_events = {};
};

/** Which connection a completion belongs to: the index of the QP whose number it carries. */
inline int connection_of(const Receiver &r, const ibv_wc &wc)
{
    for (std::size_t i = 0; i < r.qps.size(); ++i)
        if (r.qps[i]->qp_num == wc.qp_num)
            return static_cast<int>(i);
    return -1;
}

/** Take every completion the CQ holds (poll until empty), handing each message to r.on_message. */
inline std::vector<ibv_wc> take_completions(const Receiver &r)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(r.cq, 1, &wc)) > 0) {
        taken.push_back(wc);
        if (wc.status == IBV_WC_SUCCESS)
            r.on_message(wc, connection_of(r, wc));
    }
    return taken;
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion (the channel), an async event
 * (when r.on_async_events is set) or, when @p cm_fd >= 0, an RDMA CM event. Arm first, then look once more.
 * @return true when the CM's channel has an event; false when nothing came in time
 */
inline bool sleep_on_channel(const Receiver &r, int cm_fd, int wait_ms, std::vector<ibv_wc> &taken)
{
    //! [sleep]
    // Arm the CQ: its NEXT completion raises an event on the channel. A completion that came after
    // our last poll but before the arm raises none, so poll once more after arming, and sleep only if
    // that finds nothing (the event it would have raised is taken and acknowledged on a later sleep).
    check_rc(ibv_req_notify_cq(r.cq, 0), "ibv_req_notify_cq");
    taken = take_completions(r);
    if (!taken.empty())
        return false;
    // Sleep on the channel's fd, the device's async fd (an SRQ's limit) and the CM's: poll() bounds it
    // by -t, which ibv_get_cq_event() alone would not. poll() skips an entry whose fd is -1.
    const int async_fd = r.on_async_events ? r.ctx->async_fd : -1;
    pollfd fds[3] = {{r.channel->fd, POLLIN, 0}, {async_fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (poll(fds, 3, wait_ms) <= 0)
        return false;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(r.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
        ibv_ack_cq_events(ev_cq, 1); // ... and acknowledge it: ibv_destroy_cq() waits for every one
        taken = take_completions(r); // then poll until empty; the next sleep re-arms
    }
    if (fds[1].revents & POLLIN) {
        // The device raises an SRQ's limit event as it takes a receive, before that message's
        // completion: take the completions first (each refills its slot), then the event.
        for (const ibv_wc &wc : take_completions(r))
            taken.push_back(wc);
        r.on_async_events();
    }
    //! [sleep]
    return fds[2].revents & POLLIN;
}

/** Mark what the completions taken mean for each client: its message came, or its receive failed. */
inline void report(const Receiver &r, const std::vector<ibv_wc> &taken, CmClients &clients)
{
    for (const ibv_wc &wc : taken) {
        const int conn = connection_of(r, wc);
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
inline void serve(const Args &args, const Device &dev, const Receiver &r)
{
    CmConnection listener = cm_listen(args.listen_port, static_cast<int>(r.qps.size()));
    CmClients clients(r.qps); // client i gets qps[i]
    info("listening on port %u for %zu senders; waiting up to %d s for each event", args.listen_port, r.qps.size(),
         args.timeout_s);
    Deadline idle(args.timeout_s); // -t bounds the wait for each next event, not the whole service
    //! [server_loop]
    while (!clients.all_finished() && !idle.expired()) {
        // 1. Messages: one CQ for all QPs; wc.qp_num names the connection.
        std::vector<ibv_wc> taken = take_completions(r);
        report(r, taken, clients);
        // 2. Sleep until a completion or a CM event comes.
        const bool cm_event = sleep_on_channel(r, listener.channel->fd, idle.left_ms(), taken);
        report(r, taken, clients);
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
                check_rc(rdma_reject(ev->id, nullptr, 0), "rdma_reject");
                rdma_cm_id *id = ev->id;
                ev.reset(); // acknowledge the event before destroying its id
                rdma_destroy_id(id);
                break;
            }
            check_cm_device(ev->id, dev);
            ibv_qp *qp = r.qps[static_cast<std::size_t>(next)].get();
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
            report(r, take_completions(r), clients); // its message may be in the CQ already
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
    report(r, take_completions(r), clients);
    if (r.on_async_events)
        r.on_async_events(); // the last messages' limit event, if it is queued already
    clients.finish(listener, args.timeout_s, "sender", "messages arrived",
                   "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc",
                   "a sender stopped early; its output says why");
}

/** Descriptor files: for each connection, read the sender's descriptor, move to RTR/RTS, answer with ours. */
inline void connect_by_files(const Args &args, const Device &dev, const std::vector<QpPtr> &qps)
{
    for (std::size_t i = 0; i < qps.size(); ++i) {
        const int n = static_cast<int>(i);
        const ConnectionDescriptor remote = wait_for_connection_descriptor(
            {numbered_path(args.remote_descriptor_path, n), "the sender (rdma_multi_conn_send)", args.timeout_s, {}});
        const std::uint32_t psn = random_psn();
        qp_to_rtr(qps[i].get(), dev, remote);
        qp_to_rts(qps[i].get(), psn);
        ConnectionDescriptor local = describe_qp(qps[i].get(), dev, psn, new_nonce());
        local.peer_nonce = remote.nonce;
        write_descriptor_file(numbered_path(args.local_descriptor_path, n), format_descriptor(local));
    }
}

/** Wait for @p n messages (descriptor files, or a CM client): sleep on the channel, check each. */
inline void wait_for_messages(const Receiver &r, int n, int timeout_s, const std::string &what)
{
    const Deadline deadline(timeout_s);
    Completions completions(r.cq);
    for (int got = 0; got < n;) { // they arrive in any order; take_completions() printed each
        std::vector<ibv_wc> taken = take_completions(r);
        if (taken.empty() && !deadline.expired())
            sleep_on_channel(r, -1, deadline.left_ms(), taken);
        if (taken.empty() && deadline.expired())
            throw with_async_events(
                timeout_error(timeout_s, what, "is every sender still running? its output says why it stopped"), r.ctx);
        for (const ibv_wc &wc : taken) {
            completions.check(wc, IBV_WC_RECV, "the message on connection " + std::to_string(connection_of(r, wc)));
            ++got;
        }
    }
    // The last messages' limit event may still be queued: take it now. (rxe raises it as it takes the
    // receive, before the completion; a NIC reports it on its own event queue, in no set order with the CQ.)
    if (r.on_async_events)
        r.on_async_events();
}

} // namespace rdma_samples
