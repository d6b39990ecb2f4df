/**
 * @file receiving.hpp
 * @brief Many connections, receiving side: N QPs on one CQ, a sleep on its completion channel (server.hpp
 * adds the RDMA CM server loop).
 *
 * A completion names its connection by wc.qp_num and its buffer slot by wc.wr_id; each message is
 * printed as its completion is taken. Chapter 9 walks through the loop. (rdma_srq_receive writes its own,
 * which also watches the device's async fd; what the two share is common/multi_receive.hpp.)
 */
#pragma once

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/multi_receive.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <string>
#include <vector>

namespace rdma_multi_conn {

using rdma_samples::Buffer;
using rdma_samples::check_poll;
using rdma_samples::check_rc;
using rdma_samples::connection_of;
using rdma_samples::max_message_length;
using rdma_samples::MessageCount;
using rdma_samples::QpPtr;
using rdma_samples::result;

/** What the receiving loop needs: the CQ all QPs share, its channel, the QPs, the buffer their messages land in. */
struct Receiver {
    ibv_context *ctx;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    const std::vector<QpPtr> &qps;
    const Buffer &buf; ///< one max_message_length slot per connection: slot i is QP i's receive
};

/** Take every completion the CQ holds (poll until empty), printing each message as it is taken: wr_id is
 *  its slot, qp_num its connection. */
inline std::vector<ibv_wc> take_completions(const Receiver &receiver)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(receiver.cq, 1, &wc)) > 0) {
        taken.push_back(wc);
        if (wc.status != IBV_WC_SUCCESS)
            continue;
        const char *msg = receiver.buf.data() + wc.wr_id * max_message_length;
        result("Got from sender: \"%.*s\", connection %d", static_cast<int>(wc.byte_len), msg,
               connection_of(receiver.qps, wc));
    }
    return taken;
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion (the channel) or, when
 * @p cm_fd >= 0, an RDMA CM event. Arm first, then look once more.
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
    // Sleep on the channel's fd and the CM's: poll() bounds it by -t, which ibv_get_cq_event() alone
    // would not. poll() skips an entry whose fd is -1 (no CM).
    pollfd fds[2] = {{receiver.channel->fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (poll(fds, 2, wait_ms) <= 0)
        return false;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(receiver.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
        ibv_ack_cq_events(ev_cq, 1);        // ... and acknowledge it: ibv_destroy_cq() waits for every one
        taken = take_completions(receiver); // then poll until empty; the next sleep re-arms
    }
    //! [sleep]
    return fds[1].revents & POLLIN;
}

/** Wait for @p n messages (descriptor files, or a CM client): sleep on the channel, check each. */
inline void wait_for_messages(const Receiver &receiver, int n, int timeout_s, const std::string &what)
{
    MessageCount messages(receiver.cq, receiver.qps, n, timeout_s, what, receiver.ctx); // (common/multi_receive.hpp)
    while (messages.missing()) { // they arrive in any order; take_completions() printed each
        std::vector<ibv_wc> taken = take_completions(receiver);
        if (taken.empty() && !messages.expired())
            sleep_on_channel(receiver, -1, messages.left_ms(), taken);
        messages.count(taken); // each a successful RECV; none in time: the timeout error
    }
}

} // namespace rdma_multi_conn
