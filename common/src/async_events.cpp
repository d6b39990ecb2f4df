/** @file async_events.cpp @brief The device's asynchronous events, taken without waiting, named in errors. */
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/log.hpp>

#include <fcntl.h>
#include <poll.h>

#include <cstdio>

namespace rdma_samples {

const char *async_event_name(ibv_event_type type)
{
    switch (type) {
    case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
    case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
    case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
    case IBV_EVENT_WQ_FATAL: return "IBV_EVENT_WQ_FATAL";
    }
    return "IBV_EVENT_(unknown)";
}

//! [async_events]
void for_each_async_event(ibv_context *ctx, const std::function<void(const ibv_async_event &)> &fn)
{
    // The async queue is a file descriptor: make it non-blocking and ask poll() whether anything is
    // there, so that looking never waits.
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    if (flags == -1 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == -1)
        return;
    for (int n = 0; n < 16; ++n) { // a handful is enough to explain; never loop forever
        pollfd pfd{ctx->async_fd, POLLIN, 0};
        ibv_async_event ev{};
        if (poll(&pfd, 1, 0) != 1 || ibv_get_async_event(ctx, &ev) != 0)
            break;
        fn(ev);
        ibv_ack_async_event(&ev); // every event taken must be acknowledged, or destroying its object blocks
    }
}

std::string take_async_events(ibv_context *ctx)
{
    std::string events;
    for_each_async_event(ctx, [&](const ibv_async_event &ev) {
        char text[96];
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            std::snprintf(text, sizeof text, "%s on QP 0x%06x", async_event_name(ev.event_type), ev.element.qp->qp_num);
            break;
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            std::snprintf(text, sizeof text, "%s on port %d", async_event_name(ev.event_type), ev.element.port_num);
            break;
        default: std::snprintf(text, sizeof text, "%s", async_event_name(ev.event_type));
        }
        trace("async event: %s", text);
        events += (events.empty() ? "" : ", ") + std::string(text);
    });
    return events;
}
//! [async_events]

Error with_async_events(const Error &e, ibv_context *ctx)
{
    const std::string events = take_async_events(ctx);
    if (events.empty())
        return e;
    return Error(std::string(e.what()) + " (the device reported: " + events + ")", e.hint());
}

} // namespace rdma_samples
