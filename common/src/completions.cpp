/** @file completions.cpp @brief Completions found by wr_id; a flush reported through its cause. */
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/wait.hpp>

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
 * keep it newest first. That is the order a NIC may give when an ACK is late: the peer's next message before our own SEND's completion.
 * (Soft-RoCE on one machine never delays an ACK, so the tests need this to see that order at all.)
 */
int reorder_ms()
{
    static const int ms = test_control_int(TestHook::reorder_cq, 0); // read once, at the first wait
    return ms;
}

void reorder_for_test(Completions &completions, int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::vector<ibv_wc> all;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(completions.cq(), 1, &wc)) == 1)
        all.push_back(wc);
    for (auto it = all.rbegin(); it != all.rend(); ++it)
        completions.keep(*it);
    if (all.size() > 1)
        trace("test: %zu completions kept newest first", all.size());
}

} // namespace

bool Completions::take(std::uint64_t wr_id, ibv_wc &wc)
{
    if (const int ms = reorder_ms(); ms > 0 && reordered_for_ != wr_id) {
        reordered_for_ = wr_id;
        reorder_for_test(*this, ms);
    }
    const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const ibv_wc &k) { return k.wr_id == wr_id; });
    if (it == kept_.end())
        return false;
    wc = *it;
    kept_.erase(it);
    return true;
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
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            // Flushed, and none of this QP's own requests failed first: no completion here holds the
            // cause. The QP went to the error state because the connection broke, typically because
            // it refused one of the peer's requests (a NAK: the peer's completion names the error).
            try {
                check_wc(wc, expected, what);
            } catch (const Error &e) {
                throw Error(e.what(),
                            "this request was flushed because our QP went to the error state, and none of our "
                            "own requests failed first: the connection broke (for example, our QP refused a "
                            "request of the peer, whose own error names it; or the peer is gone): read the "
                            "peer's output");
            }
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

ibv_wc Completions::poll_for(std::uint64_t wr_id, int timeout_s, const std::string &what, const std::string &hint)
{
    ibv_wc wc{};
    Waiter waiter = hint.empty() ? Waiter(timeout_s, what, cq_->context) : Waiter(timeout_s, what, hint);
    while (!take(wr_id, wc)) // the loop of rdma_write/requester.cpp, step 7
        if (check_poll(ibv_poll_cq(cq_, 1, &wc)) == 1)
            keep(wc);
        else
            waiter.pause();
    return wc;
}

ibv_wc Completions::wait(std::uint64_t wr_id, ibv_wc_opcode expected, int timeout_s, const std::string &what)
{
    const ibv_wc wc = poll_for(wr_id, timeout_s, what);
    check(wc, expected, what);
    return wc;
}

} // namespace rdma_samples
