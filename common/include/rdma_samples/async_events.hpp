/**
 * @file async_events.hpp
 * @brief The device's asynchronous events: errors that belong to no work request (a QP that broke, a
 * CQ that overran, a port that went down), taken without waiting so that an error message can name them.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <infiniband/verbs.h>

#include <functional>
#include <string>

namespace rdma_samples {

/**
 * @brief Take, without waiting, each asynchronous event the device has reported so far (at most 16):
 * hand it to @p fn, then acknowledge it (ibv_ack_async_event()).
 * @param ctx the device context
 * @param fn  called once per event, before it is acknowledged
 */
void for_each_async_event(ibv_context *ctx, const std::function<void(const ibv_async_event &)> &fn);

/**
 * @brief The asynchronous events the device has reported so far, taken without blocking.
 *
 * Errors that belong to no work request arrive on the device's async event queue, not on a CQ:
 * IBV_EVENT_QP_FATAL (the QP broke), IBV_EVENT_CQ_ERR (the CQ overran: it was too small),
 * IBV_EVENT_PORT_ERR (the link went down). They explain why "nothing ever completes". Each event is
 * taken with ibv_get_async_event() and acknowledged with ibv_ack_async_event().
 * @param ctx the device context
 * @return e.g. "IBV_EVENT_QP_FATAL on QP 0x000012", several separated by ", ", or "" when none
 */
std::string take_async_events(ibv_context *ctx);

/**
 * @brief The enum name of an asynchronous event, e.g. "IBV_EVENT_QP_FATAL".
 * @param type the event type
 * @return its name
 */
const char *async_event_name(ibv_event_type type);

/**
 * @brief @p e again, with the device's asynchronous events (take_async_events()), if it reported any,
 * added to the message: "... (the device reported: IBV_EVENT_QP_FATAL on QP 0x000011)".
 * @param e   the error
 * @param ctx the device context
 * @return the error to throw
 */
Error with_async_events(const Error &e, ibv_context *ctx);

} // namespace rdma_samples
