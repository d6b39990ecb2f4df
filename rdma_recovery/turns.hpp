/**
 * @file turns.hpp
 * @brief rdma_recovery's server, one client at a time: how a connection ended (Ending), a request that
 * waits its turn (park()) and the wait for a just-accepted client's RTU (wait_established()).
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/wait.hpp>

#include <optional>
#include <string>

namespace rdma_recovery {

/** How a client's connection ended (rping names its states the same way, in enum test_state). */
enum class Ending {
    no_rtu,          ///< accepted, but no RTU came within -t
    gone_before_rtu, ///< a CM event other than ESTABLISHED came first
    gone,            ///< the client's DREQ, or its kernel's, while it was served
    bad_completion,  ///< a receive completed with an error, or was no WRITE with immediate
    bad_immediate,   ///< an immediate that names no slot
    silent,          ///< no message within -t
};

/** A connection's end: how, and the line the server prints for it. */
struct Ended {
    Ending how;
    std::string why;
};

/** A CONNECT_REQUEST that comes while a client is served waits its turn in @p waiting (a second one is
 *  refused). @param ev the event @param waiting the request served next @return false for another event */
inline bool park(rdma_samples::CmEventPtr &ev, rdma_samples::CmEventPtr &waiting)
{
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
        return false;
    if (waiting)
        rdma_samples::refuse_request(ev);
    else
        waiting = std::move(ev); // kept, not acknowledged yet: answered after this client
    return true;
}

/** Wait (bounded) until the client just accepted is ESTABLISHED (its RTU).
 *  @return nothing then, else how the connection ended */
inline std::optional<Ended> wait_established(rdma_event_channel *ch, int timeout_s, rdma_samples::CmEventPtr &waiting)
{
    for (const rdma_samples::Deadline deadline(timeout_s);;) {
        if (!rdma_samples::cm_event_ready(ch, deadline.left_ms()))
            return Ended{.how = Ending::no_rtu, .why = "no RTU within " + std::to_string(timeout_s) + " s (-t)"};
        rdma_cm_event *raw = nullptr;
        rdma_samples::check_rc(rdma_get_cm_event(ch, &raw), "rdma_get_cm_event");
        rdma_samples::CmEventPtr ev(raw);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
            return std::nullopt;
        const std::string name = rdma_samples::cm_event_name(ev->event);
        if (!park(ev, waiting))
            return Ended{.how = Ending::gone_before_rtu,
                         .why = "the client is gone before its connection was established (" + name + ")"};
    }
}

} // namespace rdma_recovery
