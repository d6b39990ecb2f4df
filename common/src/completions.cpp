/** @file completions.cpp @brief Completions found by wr_id; the device's asynchronous events. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/wait.hpp>

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace rdma_samples {

namespace {

/**
 * Fault injection for the tests, never set in normal use: RDMA_SAMPLES_TEST_REORDER_CQ=MS makes every
 * wait (the first take() of each wr_id) sleep MS milliseconds, then take all that the CQ holds and
 * keep it newest first. That is the
 * order a NIC may give when an ACK is late: the peer's next message before our own SEND's completion.
 * (Soft-RoCE on one machine never delays an ACK, so the tests need this to see that order at all.)
 */
int reorder_ms()
{
    const char *v = std::getenv("RDMA_SAMPLES_TEST_REORDER_CQ");
    return v != nullptr ? std::atoi(v) : 0;
}

void reorder_for_test(Completions &done, int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::vector<ibv_wc> all;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(done.cq(), 1, &wc)) == 1)
        all.push_back(wc);
    for (auto it = all.rbegin(); it != all.rend(); ++it)
        done.keep(*it);
    if (all.size() > 1)
        trace("test: %zu completions kept newest first", all.size());
}

} // namespace

std::optional<ibv_wc> Completions::take(std::uint64_t wr_id)
{
    const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const ibv_wc &wc) { return wc.wr_id == wr_id; });
    if (it == kept_.end())
        return std::nullopt;
    const ibv_wc wc = *it;
    kept_.erase(it);
    return wc;
}

bool Completions::take(std::uint64_t wr_id, ibv_wc &wc)
{
    if (const int ms = reorder_ms(); ms > 0 && reordered_for_ != wr_id) {
        reordered_for_ = wr_id;
        reorder_for_test(*this, ms);
    }
    const std::optional<ibv_wc> found = take(wr_id);
    if (found)
        wc = *found;
    return found.has_value();
}

void Completions::check(const ibv_wc &wc, ibv_wc_opcode expected, const std::string &what) const
{
    try {
        // Flushed: the QP had failed before this request ran. Its first failure holds the cause.
        const auto cause = first_error();
        if (cause && wc.status == IBV_WC_WR_FLUSH_ERR && cause->qp_num == wc.qp_num) {
            char id[32];
            std::snprintf(id, sizeof id, "0x%llx", static_cast<unsigned long long>(cause->wr_id));
            check_wc(*cause, expected, what + " was flushed: an earlier request (wr_id " + id + ")");
        }
        check_wc(wc, expected, what);
    } catch (const Error &e) {
        throw with_async_events(e, cq_->context);
    }
}

std::optional<ibv_wc> Completions::first_error() const
{
    for (const ibv_wc &wc : kept_)
        if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
            return wc;
    return std::nullopt;
}

ibv_wc Completions::wait(std::uint64_t wr_id, ibv_wc_opcode expected, int timeout_s, const std::string &what)
{
    ibv_wc wc{};
    Waiter waiter(timeout_s, what, cq_->context);
    while (!take(wr_id, wc))
        if (check_poll(ibv_poll_cq(cq_, 1, &wc)) == 1)
            keep(wc);
        else
            waiter.pause();
    check(wc, expected, what);
    return wc;
}

std::string take_async_events(ibv_context *ctx)
{
    // The async queue is a file descriptor: make it non-blocking and ask poll() whether anything is
    // there, so that looking never waits.
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    if (flags == -1 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == -1)
        return {};
    std::string events;
    for (int n = 0; n < 16; ++n) { // a handful is enough to explain; never loop forever
        pollfd pfd{ctx->async_fd, POLLIN, 0};
        ibv_async_event ev{};
        if (poll(&pfd, 1, 0) != 1 || ibv_get_async_event(ctx, &ev) != 0)
            break;
        char text[96];
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
            std::snprintf(text, sizeof text, "%s on QP 0x%06x", async_event_name(ev.event_type), ev.element.qp->qp_num);
            break;
        case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE: case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            std::snprintf(text, sizeof text, "%s on port %d", async_event_name(ev.event_type), ev.element.port_num);
            break;
        default:
            std::snprintf(text, sizeof text, "%s", async_event_name(ev.event_type));
        }
        ibv_ack_async_event(&ev); // every event taken must be acknowledged, or destroying its object blocks
        trace("async event: %s", text);
        events += (events.empty() ? "" : ", ") + std::string(text);
    }
    return events;
}
//! [async_events]

} // namespace rdma_samples
