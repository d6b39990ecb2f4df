/**
 * @file recovery.hpp
 * @brief rdma_recovery's bookkeeping beside the lesson: the async events and the second round's timeout
 * hint (flags in support/options.hpp, the slots in support/slots.hpp, the server's turns in turns.hpp).
 * The recovery itself is in the lesson files: the flush, RESET and the new PSNs in requester.cpp and
 * responder.cpp, the reconnect in client.cpp and server.cpp.
 */
#pragma once

#include "support/options.hpp"
#include "support/slots.hpp"

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/descriptor_file.hpp>

#include <infiniband/verbs.h>

#include <string>

namespace rdma_recovery {

/** @brief How often the RDMA CM client connects again before it gives up: a server that fails every
 *  connection is not worth more (each try is bounded by -t as well). */
inline constexpr int max_reconnects = 3;

/**
 * @brief The device's asynchronous events so far (take_async_events()), or "none". The IBTA lets a
 * device report a responder's refused request as IBV_EVENT_QP_ACCESS_ERR; Soft-RoCE reports nothing.
 * @param ctx the device @return the events, or "none"
 */
inline std::string async_events_or_none(ibv_context *ctx)
{
    const std::string events = rdma_samples::take_async_events(ctx);
    return events.empty() ? "none" : events;
}

/**
 * @brief The second round of descriptors: wait_for_connection_descriptor(), and on a timeout the
 * recovery's own hint instead of "start the peer", which the first round gives.
 * @param wait what to wait for @param hint what to check when nothing comes @return the descriptor
 */
inline rdma_samples::ConnectionDescriptor wait_with_hint(const rdma_samples::WaitFor &wait, const std::string &hint)
{
    try {
        return rdma_samples::wait_for_connection_descriptor(wait);
    } catch (const rdma_samples::DescriptorError &) {
        throw; // a malformed file: its own hint says where a good one comes from
    } catch (const rdma_samples::Error &e) {
        throw rdma_samples::Error(e.what(), hint);
    }
}

} // namespace rdma_recovery
