/**
 * @file cm_internal.hpp
 * @brief The RDMA CM's inner workings, private to the common library: the event channel and bounded
 * event waits (cm_events.cpp), the QP attributes the CM negotiates and listening (cm.cpp). Samples see
 * cm.hpp, cm_server.hpp and exchange.hpp only.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/wait.hpp>

#include <rdma/rdma_cma.h>

#include <string>

namespace rdma_samples {

/**
 * @brief The event name, e.g. "RDMA_CM_EVENT_REJECTED" (rdma_event_str()).
 * @param type the event type
 * @return its name
 */
std::string cm_event_name(rdma_cm_event_type type);

/**
 * @brief rdma_create_event_channel(), its fd made non-blocking so waits can be bounded.
 * @return the channel
 */
EventChannelPtr create_event_channel();

/**
 * @brief Wait for the next CM event on @p ch until @p deadline.
 * @param ch       the event channel
 * @param deadline when to give up
 * @return the event, or an empty pointer when the deadline passed first
 */
CmEventPtr next_cm_event(rdma_event_channel *ch, const Deadline &deadline);

/**
 * @brief Wait (bounded by @p timeout_s) for event @p expected on @p ch; any failure event becomes an
 * Error whose message names it and @p what, with a hint that names @p peer (ADDR port P).
 * @param ch        the event channel
 * @param expected  e.g. RDMA_CM_EVENT_ADDR_RESOLVED
 * @param timeout_s the bound (-t)
 * @param what      what is waited for, e.g. "the server to accept"
 * @param peer      addr_to_string() of the other side, for hints
 * @return the event
 */
CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, int timeout_s, const std::string &what,
                           const std::string &peer);

/**
 * @brief The Error (with hint) for an unexpected or failure event while waiting for @p what.
 * @param ev   the event that arrived
 * @param what what was waited for
 * @param peer the other side, as text, for the hint
 * @return the error to throw
 */
Error cm_event_error(const rdma_cm_event &ev, const std::string &what, const std::string &peer);

/**
 * @brief The device and port the CM chose for @p id must be the ones this side opened (-d).
 * @param id  the resolved cm_id
 * @param dev the device this side opened
 * @throws Error naming both devices, with the -d to pass
 */
void check_cm_device(const rdma_cm_id *id, const Device &dev);

/**
 * @brief Move our own QP to RTR and RTS with the attributes the CM negotiated (rdma_init_qp_attr()),
 * then set the timers and READ/atomic depths ourselves, so that both flows run with the same values.
 *
 * rdma_init_qp_attr() would give min_rnr_timer 0 (655 ms, the IB CM's default) and an ACK timeout
 * derived from the path's packet lifetime; the samples teach min_rnr_timer 12 and timeout 14
 * (rc_qp.hpp), so they are set explicitly here, as the descriptor-file flow sets them.
 * @param id                  the connected (or connecting) cm_id
 * @param qp                  our QP, in INIT
 * @param responder_resources READs/atomics the peer may have in flight at us (max_dest_rd_atomic)
 * @param initiator_depth     READs/atomics we may have in flight at the peer (max_rd_atomic)
 */
void cm_ready_qp(rdma_cm_id *id, ibv_qp *qp, int responder_resources = 0, int initiator_depth = 0);

/**
 * @brief Connection parameters for our own QP: its number, retry counts that end (6), and the
 * READ/atomic depths in both directions.
 * @param qp                  our queue pair
 * @param responder_resources READs/atomics the peer may have in flight at us
 * @param initiator_depth     READs/atomics we may have in flight at the peer
 * @return the parameters for rdma_connect() / rdma_accept()
 */
rdma_conn_param cm_conn_param(const ibv_qp *qp, int responder_resources = 0, int initiator_depth = 0);

/**
 * @brief Server side of `-cm`: bind port `-lp` on every address, listen.
 * @param args      the command line (-lp)
 * @param backlog   connection requests the kernel may queue
 * @return a connection with channel and listen_id set, id empty
 */
CmConnection cm_listen(const Args &args, int backlog = 1);

} // namespace rdma_samples
