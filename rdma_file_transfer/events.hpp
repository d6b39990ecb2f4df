/**
 * @file events.hpp
 * @brief rdma_file_transfer's one wait: sleep on a completion channel and on the CM's event channel,
 * bounded by -t for each wait and by --deadline for the whole transfer. Both sides use it.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/wait.hpp>

#include <cerrno>
#include <poll.h>

namespace file_transfer {

/** @brief What a wait needs: the CQ and its channel, the CM's channel, both clocks, who the peer is. */
struct Events {
    ibv_cq *cq;                      ///< the one CQ of the QP (sends and receives)
    ibv_comp_channel *channel;       ///< the CQ's completion channel
    rdma_event_channel *cm_channel;  ///< where DISCONNECTED (and, on the receiver, other senders) arrive
    int timeout_s;                   ///< -t: the longest any one wait may last
    rdma_samples::Deadline transfer; ///< --deadline: the end of the whole transfer
    std::string peer;                ///< "the sender" or "the receiver", for messages
    bool peer_gone = false;          ///< DISCONNECTED came: what is still in the CQ is the last of it
};

/** @brief A second peer while we serve one: refuse its request (it sees REJECTED), forget its cm_id. */
inline void turn_away(rdma_samples::CmEventPtr ev)
{
    rdma_cm_id *other = ev->id;
    rdma_samples::check_rc(rdma_reject(other, nullptr, 0), "rdma_reject");
    ev.reset(); // acknowledge the event before destroying its id
    rdma_destroy_id(other);
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
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(e.cq, 1, &wc)) == 1) // poll until empty: one per call
            return wc;
        // Empty: arm the CQ, so that its NEXT completion raises an event on the channel. The race: a
        // completion that came after the poll above but before the arm raises no event, and we would
        // sleep through it. So poll once more AFTER arming; sleep only if that finds nothing too.
        check_rc(ibv_req_notify_cq(e.cq, 0), "ibv_req_notify_cq");
        if (check_poll(ibv_poll_cq(e.cq, 1, &wc)) == 1)
            return wc;   // (the armed event fires later; the next sleep takes it and polls again)
        if (e.peer_gone) // the CQ is drained: whatever the peer said before it left has been read
            throw rdma_samples::Error(e.peer + " went away (RDMA_CM_EVENT_DISCONNECTED) while we waited for " + what,
                                      e.peer + "'s output says why; a file not yet verified is not kept");
        // Sleep on two file descriptors: the completion channel, and the CM's (a peer that goes away
        // sends a DREQ: DISCONNECTED). poll() bounds the sleep; ibv_get_cq_event() alone would not.
        pollfd fds[2] = {{e.channel->fd, POLLIN, 0}, {e.cm_channel->fd, POLLIN, 0}};
        const int ready = poll(fds, 2, std::min(deadline.left_ms(), e.transfer.left_ms()));
        if (ready < 0 && errno == EINTR)
            continue; // a signal, not the end of the wait
        if (ready < 0)
            rdma_samples::fail_errno("poll", errno);
        if (ready == 0 && e.transfer.expired())
            throw rdma_samples::Error("the whole transfer took longer than --deadline " +
                                          std::to_string(e.transfer.timeout_s()) + " s; we were waiting for " + what,
                                      e.peer + " sends too slowly; raise --deadline for a big file on a slow link");
        if (ready == 0)
            throw rdma_samples::timeout_error(e.timeout_s, what,
                                              "is " + e.peer + " still running? its output says why it stopped");
        if (fds[1].revents & POLLIN) {
            rdma_cm_event *raw = nullptr;
            check_rc(rdma_get_cm_event(e.cm_channel, &raw), "rdma_get_cm_event");
            rdma_samples::CmEventPtr event(raw);
            if (event->event == RDMA_CM_EVENT_DISCONNECTED)
                e.peer_gone = true; // poll the CQ dry first: a refusal may be waiting there
            else if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
                turn_away(std::move(event)); // one peer at a time
        }
        if (fds[0].revents & POLLIN) {
            ibv_cq *ev_cq = nullptr;
            void *ev_ctx = nullptr;
            check_rc(ibv_get_cq_event(e.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
            ibv_ack_cq_events(ev_cq, 1); // ... and acknowledge it: ibv_destroy_cq() waits for every one
        }
    }
    //! [event_loop]
}

} // namespace file_transfer
