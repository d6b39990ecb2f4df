/**
 * @file cq_channel.cpp
 * @brief A completion channel's arm -> poll -> sleep -> get -> acknowledge, bounded by the caller's clock.
 */
#include <rdma_samples/check.hpp>
#include <rdma_samples/cq_channel.hpp>
#include <rdma_samples/log.hpp>

#include <cerrno>
#include <vector>

namespace rdma_samples {

int arm_cq_and_poll(ibv_cq *cq, std::span<ibv_wc> wc)
{
    // (check_rc() only to trace or to fail: it builds a string, and rdma_bench arms once per empty poll)
    if (const int rc = ibv_req_notify_cq(cq, 0); rc != 0 || verbose())
        check_rc(rc, "ibv_req_notify_cq");
    return check_poll(ibv_poll_cq(cq, static_cast<int>(wc.size()), wc.data()));
}

int sleep_on_cq_channel(ibv_comp_channel *channel, std::span<pollfd> others, int wait_ms)
{
    std::vector<pollfd> fds{{channel->fd, POLLIN, 0}};
    fds.insert(fds.end(), others.begin(), others.end());
    const int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR)
        return 0; // a signal, not an event: the caller's deadline says whether to sleep again
    if (ready < 0)
        fail_errno("poll", errno);
    for (std::size_t i = 0; i < others.size(); ++i)
        others[i].revents = fds[i + 1].revents;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
        ibv_ack_cq_events(ev_cq, 1); // ... and acknowledge it now: ibv_destroy_cq() waits for every one
    }
    return ready;
}

} // namespace rdma_samples
