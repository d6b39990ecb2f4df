/**
 * @file receiving.hpp
 * @brief rdma_srq_receive's loop: take the completions (each message printed, its slot given back to the
 * pool), and sleep on the completion channel, the device's async fd (the SRQ limit event) and, as an
 * RDMA CM server, the CM's channel.
 *
 * rdma_multi_conn_receive's loop (chapter 9) watches no async fd; what the two receivers share, the
 * descriptor files of N QPs and the CM server's switch, is common/multi_receive.hpp.
 */
#pragma once

#include "pool.hpp"

#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/cq_channel.hpp>
#include <rdma_samples/multi_receive.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <string>
#include <utility>
#include <vector>

namespace rdma_srq {

/** What the loop needs: the device (its async fd), the CQ all QPs share and its channel, the QPs, the pool. */
struct Receiver {
    ibv_context *ctx;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    const std::vector<QpPtr> &qps;
    const Pool &pool;
};

/** Take every completion the CQ holds (poll until empty): print each message, give its slot back. */
inline std::vector<ibv_wc> take_completions(const Receiver &r)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(r.cq, 1, &wc)) > 0) {
        taken.push_back(wc);
        if (wc.status == IBV_WC_SUCCESS)
            take_message(r.pool, wc, connection_of(r.qps, wc));
    }
    return taken;
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion, an async event (the SRQ limit)
 * or, when @p cm_fd >= 0, an RDMA CM event; then take the completions, and the async events after them.
 * @return true when the CM's channel has an event
 */
inline bool sleep_on_fds(const Receiver &r, int cm_fd, int wait_ms, std::vector<ibv_wc> &taken)
{
    //! [sleep]
    // Arm the CQ and look once more; sleep only if that finds nothing (common/cq_channel.hpp: the
    // completion channel's wait, written out in chapter 9, which also takes and acknowledges its event).
    ibv_wc wc{};
    if (arm_cq_and_poll(r.cq, {&wc, 1}) == 1) { // (its armed event fires later; a later sleep takes it)
        taken.push_back(wc);
        if (wc.status == IBV_WC_SUCCESS)
            take_message(r.pool, wc, connection_of(r.qps, wc));
        return false;
    }
    // Beside the completion channel: the device's async fd, where the SRQ limit event arrives, and the
    // CM's channel. poll() skips an entry whose fd is -1 (no CM).
    pollfd fds[2] = {{r.ctx->async_fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (sleep_on_cq_channel(r.channel, fds, wait_ms) == 0)
        return false;
    // The device raises the limit event as it takes a receive, before that message's completion: take
    // the completions first (each refills its slot), then the event.
    taken = take_completions(r);
    if (fds[0].revents & POLLIN)
        take_async_events(r.ctx, r.pool);
    //! [sleep]
    return fds[1].revents & POLLIN;
}

/** Wait for @p n messages (descriptor files): sleep on the fds, check each message. */
inline void wait_for_messages(const Receiver &r, int n, int timeout_s, const std::string &what)
{
    MessageCount messages(r.cq, r.qps, n, timeout_s, what, r.ctx); // (common/multi_receive.hpp)
    while (messages.missing()) { // they arrive in any order; take_completions() printed each
        std::vector<ibv_wc> taken = take_completions(r);
        if (taken.empty() && !messages.expired())
            sleep_on_fds(r, -1, messages.left_ms(), taken);
        messages.count(taken); // each a successful RECV; none in time: the timeout error
    }
    // The last messages' limit event may still be queued: take it now. (rxe raises it as it takes the
    // receive, before the completion; a NIC reports it on its own event queue, in no set order with the CQ.)
    take_async_events(r.ctx, r.pool);
}

/** The CM server (rdma_multi_conn's loop, chapter 9, with the async fd watched): accept up to N senders,
 *  take each message as it arrives, survive the ones that fail. */
inline void serve(const Args &args, const Device &dev, const Receiver &r)
{
    SenderServer server(args, dev, r.qps); // listens; client i gets qps[i] (common/multi_receive.hpp)
    for (;;) {
        std::vector<ibv_wc> taken = take_completions(r);
        server.report(taken);
        if (!server.serving())
            break;
        if (!sleep_on_fds(r, server.fd(), server.left_ms(), taken)) {
            server.report(taken); // a completion, a limit event, or nothing in time
            continue;
        }
        server.report(taken);
        CmEventPtr ev = server.next_event(); // acknowledged when it goes
        if (SenderServer::ends_connection(*ev))
            server.report(take_completions(r)); // a sender gone: its message first
        server.serve(std::move(ev));
    }
    take_async_events(r.ctx, r.pool); // the last messages' limit event, if it is queued already
    server.finish();
}

} // namespace rdma_srq
