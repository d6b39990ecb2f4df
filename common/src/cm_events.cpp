/** @file cm_events.cpp @brief RDMA CM events: a non-blocking channel, bounded waits, failures explained. */
#include "cm_internal.hpp"

#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>

#include <cstring>

#include <fcntl.h>
#include <poll.h>

namespace rdma_samples {

std::string cm_event_name(rdma_cm_event_type type)
{
    std::string s = rdma_event_str(type);
    return s.rfind("RDMA_CM_EVENT_", 0) == 0 ? s : "RDMA_CM_EVENT_" + s;
}

EventChannelPtr create_event_channel()
{
    EventChannelPtr ch(check(rdma_create_event_channel(), "rdma_create_event_channel"));
    // Non-blocking, so that every wait below can poll() the fd with a timeout (-t) instead of blocking
    // in rdma_get_cm_event() forever when the peer never answers.
    const int flags = fcntl(ch->fd, F_GETFL);
    check_rc(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == -1 ? -1 : 0, "fcntl(O_NONBLOCK) on the CM event channel");
    return ch;
}

CmEventPtr next_cm_event(rdma_event_channel *ch, const Deadline &deadline)
{
    for (;;) {
        rdma_cm_event *ev = nullptr;
        if (rdma_get_cm_event(ch, &ev) == 0) {
            trace("rdma_get_cm_event = %s, status %d", cm_event_name(ev->event).c_str(), ev->status);
            return CmEventPtr(ev);
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail_errno("rdma_get_cm_event", errno);
        if (deadline.expired())
            return nullptr;
        cm_event_ready(ch, deadline.left_ms());
    }
}

bool cm_event_ready(rdma_event_channel *ch, int wait_ms)
{
    pollfd pfd{ch->fd, POLLIN, 0};
    const int n = poll(&pfd, 1, wait_ms);
    if (n < 0 && errno != EINTR)
        fail_errno("poll(CM event channel)", errno);
    return n > 0;
}

std::string cm_reject_reason(const rdma_cm_event &ev)
{
    // A REJ's private data is the rejecting side's (rdma_reject()), padded with zeros by the CM (148
    // bytes on IB and RoCE): the text up to the first NUL, within the length the event gives.
    if (ev.event != RDMA_CM_EVENT_REJECTED || ev.param.conn.private_data == nullptr)
        return "";
    const char *p = static_cast<const char *>(ev.param.conn.private_data);
    return std::string(p, strnlen(p, ev.param.conn.private_data_len));
}

Error cm_event_error(const rdma_cm_event &ev, const std::string &what, const std::string &peer)
{
    const std::string head =
        "waiting for " + what + ": got " + cm_event_name(ev.event) + " (status " + std::to_string(ev.status) + ")";
    switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
        return Error(head, "no local RDMA device reaches " + peer +
                               ": check the address, that it is on a network "
                               "an RDMA device is bound to (rdma link show), and -sat");
    case RDMA_CM_EVENT_ROUTE_ERROR:
        return Error(head, "no route to " + peer + " through the RDMA device; check `ip route get` for the address");
    case RDMA_CM_EVENT_UNREACHABLE:
        return Error(head, "the CM got no answer from " + peer +
                               ": is the server running there, is the network up, "
                               "and is the server's RDMA device bound to that address?");
    case RDMA_CM_EVENT_REJECTED:
        if (cm_nobody_listens(ev)) // no listener on that port
            return Error(head + ": nobody listens on " + peer, "is the server running on " + peer +
                                                                   "? start it "
                                                                   "first (the side without -sa), with the same -lp");
        if (const std::string why = cm_reject_reason(ev); !why.empty()) // the server said why: quoted, its text
            return Error(
                head + ": the server refused the connection: " + quote(why, 100),
                "the server's reason is above (a server refuses a client it cannot serve now: one beyond --max-clients, a second sender)");
        return Error(head + ": the server refused the connection",
                     "the server may have all the clients it expects (-nc) or may have stopped; check its output");
    case RDMA_CM_EVENT_CONNECT_ERROR:
        return Error(head, "the connection failed while being set up; check the peer's output");
    case RDMA_CM_EVENT_DISCONNECTED:
        return Error(head + ": the peer disconnected", "the peer stopped early; its output says why");
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return Error(head + ": the RDMA device went away", "check `rdma link show`");
    default: return Error(head, "an event this sample does not expect here; check the peer's output");
    }
}

CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, int timeout_s, const std::string &what,
                           const std::string &peer)
{
    return expect_cm_event(ch, expected, Deadline(timeout_s), what, peer);
}

CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, const Deadline &deadline,
                           const std::string &what, const std::string &peer)
{
    for (;;) {
        CmEventPtr ev = next_cm_event(ch, deadline);
        if (!ev)
            throw timeout_error(
                deadline.timeout_s(), what + " (" + cm_event_name(expected) + ")",
                "no answer from " + peer +
                    ": is the peer running, with -cm and the same -lp, on a device of the same transport "
                    "(RoCE and iWARP do not talk)? raise -t if it is just slow");
        if (ev->event == expected && ev->status == 0)
            return ev;
        // Housekeeping events that say nothing about this connection.
        if (ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT || ev->event == RDMA_CM_EVENT_ADDR_CHANGE)
            continue;
        throw cm_event_error(*ev, what, peer);
    }
}

} // namespace rdma_samples
