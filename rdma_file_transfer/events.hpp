/**
 * @file events.hpp
 * @brief rdma_file_transfer's one wait: sleep on a completion channel and on the CM's event channel,
 * bounded by -t for each wait and by --deadline for the whole transfer. Both sides use it.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/cq_channel.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <algorithm>

namespace rdma_file_transfer {

/** @brief The peer as the CM's event channel tells of it. */
enum class PeerState {
    connected,    ///< no DISCONNECTED yet
    disconnected, ///< DISCONNECTED came: what is still in the CQ is the last of it
};

/** @brief What a wait needs: the CQ and its channel, the CM's channel, both clocks, who the peer is. */
struct Events {
    ibv_cq *cq;                                  ///< the one CQ of the QP (sends and receives)
    ibv_comp_channel *channel;                   ///< the CQ's completion channel
    rdma_event_channel *cm_channel;              ///< where DISCONNECTED (and, on the receiver, other senders) arrive
    int timeout_s;                               ///< -t: the longest any one wait may last
    rdma_samples::Deadline transfer;             ///< --deadline: the end of the whole transfer
    std::string peer;                            ///< "the sender" or "the receiver", for messages
    PeerState peer_state = PeerState::connected; ///< disconnected: the CQ holds the last of what it said
};

/** @brief Take one event from the CM's channel: DISCONNECTED marks the peer gone (what it said before
 *  is still in the CQ); another sender's request is refused, here or after the file was kept;
 *  TIMEWAIT_EXIT changes nothing; anything else (DEVICE_REMOVAL, ADDR_CHANGE) ends the wait, named.
 *  @param e the connection @param what what we wait for, for errors */
inline void take_cm_event(Events &e, const std::string &what)
{
    rdma_cm_event *raw = nullptr;
    rdma_samples::check_rc(rdma_get_cm_event(e.cm_channel, &raw), "rdma_get_cm_event");
    rdma_samples::CmEventPtr event(raw);
    switch (event->event) {
    case RDMA_CM_EVENT_DISCONNECTED: e.peer_state = PeerState::disconnected; break;
    case RDMA_CM_EVENT_CONNECT_REQUEST: // one peer at a time
        rdma_samples::refuse_request(event, "one sender at a time: another is being served");
        break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: break;
    default:
        throw rdma_samples::Error("RDMA CM: " + rdma_samples::cm_event_name(event->event) + " while we waited for " +
                                      what,
                                  event->event == RDMA_CM_EVENT_DEVICE_REMOVAL
                                      ? "the RDMA device went away (rdma link show; dmesg)"
                                      : "check the device and its network interface (rdma link show)");
    }
}

/** @brief The next completion, sleeping on the completion channel while there is none.
 *  @param e the connection's channels and clocks @param what what we wait for, for errors
 *  @return the completion (its status not yet checked) */
inline ibv_wc next_completion(Events &e, const std::string &what)
{
    using rdma_samples::check_poll;
    using rdma_samples::check_rc;
    //! [event_loop]
    const rdma_samples::Deadline deadline(e.timeout_s);
    for (;;) {
        // Both clocks on every pass, not only when a sleep ends empty-handed: a peer that always has a
        // completion pending, or a stream of connection requests, must not keep us past either.
        if (e.transfer.expired())
            throw rdma_samples::Error("the whole transfer took longer than --deadline " +
                                          std::to_string(e.transfer.timeout_s()) + " s; we were waiting for " + what,
                                      e.peer + " sends too slowly; raise --deadline for a big file on a slow link");
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(e.cq, 1, &wc)) == 1) // poll until empty: one per call
            return wc;
        // Empty: arm the CQ and poll once more (a completion just before the arm raises no event).
        if (rdma_samples::arm_cq_and_poll(e.cq, {&wc, 1}) == 1)
            return wc; // (the armed event fires later; the next sleep takes it and polls again)
        // Drained: if the peer is gone, whatever it said before it left has been read.
        if (e.peer_state == PeerState::disconnected)
            throw rdma_samples::Error(e.peer + " went away (RDMA_CM_EVENT_DISCONNECTED) while we waited for " + what,
                                      e.peer + "'s output says why; a file not yet verified is not kept");
        if (deadline.expired())
            throw rdma_samples::timeout_error(e.timeout_s, what,
                                              "is " + e.peer + " still running? its output says why it stopped");
        // Sleep on the completion channel and on the CM's channel (a peer that goes away sends a DREQ:
        // DISCONNECTED), taking and acknowledging the channel's event (common/cq_channel.hpp).
        pollfd fds[1] = {{e.cm_channel->fd, POLLIN, 0}};
        rdma_samples::sleep_on_cq_channel(e.channel, fds, std::min(deadline.left_ms(), e.transfer.left_ms()));
        if (fds[0].revents & POLLIN)
            take_cm_event(e, what); // (DISCONNECTED: the CQ is polled dry first, a refusal may wait there)
    }
    //! [event_loop]
}

/** @brief The end: wait (-t) until the peer disconnects (its DREQ), with the CM's events handled as
 *  during the transfer (another sender's request refused). Completions are not looked at any more.
 *  @param e the connection @param what what we wait for, for errors */
inline void wait_disconnected(Events &e, const std::string &what)
{
    const rdma_samples::Deadline deadline(e.timeout_s);
    while (e.peer_state == PeerState::connected) {
        if (deadline.expired())
            throw rdma_samples::timeout_error(e.timeout_s, what, "is " + e.peer + " still running?");
        if (rdma_samples::cm_event_ready(e.cm_channel, deadline.left_ms()))
            take_cm_event(e, what);
    }
}

} // namespace rdma_file_transfer
