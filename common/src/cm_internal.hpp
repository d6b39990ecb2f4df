/**
 * @file cm_internal.hpp
 * @brief The RDMA CM's inner workings, private to the common library: the event channel and bounded
 * event waits, failure events explained (cm_events.cpp). Samples see cm.hpp, cm_server.hpp and
 * exchange.hpp only.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/wait.hpp>

#include <rdma/rdma_cma.h>

#include <string>

namespace rdma_samples {

/**
 * @brief The REJECT reason the server's CM gives when nobody listens on the port: IBTA CM reason 8,
 * "Invalid Service ID" (IB_CM_REJ_INVALID_SERVICE_ID in the kernel's ib_cm.h); librdmacm hands it over
 * in the REJECTED event's status field (rdma_get_cm_event(3)).
 */
inline constexpr int rej_invalid_service_id = 8;

/**
 * @brief Wait for the next CM event on @p ch until @p deadline.
 * @param ch       the event channel
 * @param deadline when to give up
 * @return the event, or an empty pointer when the deadline passed first
 */
CmEventPtr next_cm_event(rdma_event_channel *ch, const Deadline &deadline);

/**
 * @brief The Error (with hint) for an unexpected or failure event while waiting for @p what.
 * @param ev   the event that arrived
 * @param what what was waited for
 * @param peer the other side, as text, for the hint
 * @return the error to throw
 */
Error cm_event_error(const rdma_cm_event &ev, const std::string &what, const std::string &peer);

} // namespace rdma_samples
