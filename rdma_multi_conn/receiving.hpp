/**
 * @file receiving.hpp
 * @brief Many connections, receiving side: N QPs on one CQ, a sleep on its completion channel, the
 * descriptor-file flow (server.hpp adds the RDMA CM server loop).
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
inline int connection_of(const Receiver &receiver, const ibv_wc &wc)
{
    for (std::size_t i = 0; i < receiver.qps.size(); ++i)
        if (receiver.qps[i]->qp_num == wc.qp_num)
            return static_cast<int>(i);
    return -1;
}

/** Take every completion the CQ holds (poll until empty), handing each message to receiver.on_message. */
inline std::vector<ibv_wc> take_completions(const Receiver &receiver)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(receiver.cq, 1, &wc)) > 0) {
        taken.push_back(wc);
        if (wc.status == IBV_WC_SUCCESS)
            receiver.on_message(wc, connection_of(receiver, wc));
    }
    return taken;
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion (the channel), an async event
 * (when receiver.on_async_events is set) or, when @p cm_fd >= 0, an RDMA CM event. Arm first, then look once more.
 * @return true when the CM's channel has an event; false when nothing came in time
 */
inline bool sleep_on_channel(const Receiver &receiver, int cm_fd, int wait_ms, std::vector<ibv_wc> &taken)
{
    //! [sleep]
    // Arm the CQ: its NEXT completion raises an event on the channel. A completion that came after
    // our last poll but before the arm raises none, so poll once more after arming, and sleep only if
    // that finds nothing (the event it would have raised is taken and acknowledged on a later sleep).
    check_rc(ibv_req_notify_cq(receiver.cq, 0), "ibv_req_notify_cq");
    taken = take_completions(receiver);
    if (!taken.empty())
        return false;
    // Sleep on the channel's fd, the device's async fd (an SRQ's limit) and the CM's: poll() bounds it
    // by -t, which ibv_get_cq_event() alone would not. poll() skips an entry whose fd is -1.
    const int async_fd = receiver.on_async_events ? receiver.ctx->async_fd : -1;
    pollfd fds[3] = {{receiver.channel->fd, POLLIN, 0}, {async_fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (poll(fds, 3, wait_ms) <= 0)
        return false;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(receiver.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
        ibv_ack_cq_events(ev_cq, 1);        // ... and acknowledge it: ibv_destroy_cq() waits for every one
        taken = take_completions(receiver); // then poll until empty; the next sleep re-arms
    }
    if (fds[1].revents & POLLIN) {
        // The device raises an SRQ's limit event as it takes a receive, before that message's
        // completion: take the completions first (each refills its slot), then the event.
        for (const ibv_wc &wc : take_completions(receiver))
            taken.push_back(wc);
        receiver.on_async_events();
    }
    //! [sleep]
    return fds[2].revents & POLLIN;
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
inline void wait_for_messages(const Receiver &receiver, int n, int timeout_s, const std::string &what)
{
    const Deadline deadline(timeout_s);
    Completions completions(receiver.cq);
    for (int got = 0; got < n;) { // they arrive in any order; take_completions() printed each
        std::vector<ibv_wc> taken = take_completions(receiver);
        if (taken.empty() && !deadline.expired())
            sleep_on_channel(receiver, -1, deadline.left_ms(), taken);
        if (taken.empty() && deadline.expired())
            throw with_async_events(
                timeout_error(timeout_s, what, "is every sender still running? its output says why it stopped"),
                receiver.ctx);
        for (const ibv_wc &wc : taken) {
            completions.check(wc, IBV_WC_RECV,
                              "the message on connection " + std::to_string(connection_of(receiver, wc)));
            ++got;
        }
    }
    // The last messages' limit event may still be queued: take it now. (rxe raises it as it takes the
    // receive, before the completion; a NIC reports it on its own event queue, in no set order with the CQ.)
    if (receiver.on_async_events)
        receiver.on_async_events();
}

} // namespace rdma_samples
