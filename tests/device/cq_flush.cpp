/**
 * @file cq_flush.cpp
 * @brief Device test: every outstanding send request completes when its QP fails, signaled or not, so a
 * CQ needs room for all of them (rc_qp.hpp, cq_entries()).
 *
 * The lesson: `sq_sig_all = 0` and IBV_SEND_SIGNALED decide which SUCCESSFUL send requests produce a
 * completion. A request that fails, or is flushed because its QP went to the error state, completes
 * with its status whether it was signaled or not (IBTA vol. 1, 10.7.3.1; rdma_rxe's rxe_comp.c posts a
 * CQE for every request whose status is not success). With selective signaling (one request in N, as
 * chapter 10's bench does) a CQ sized for the signaled requests only is overrun by the first error.
 *
 * The test, on one device: a QP with 16 send and 4 receive slots is connected to a second QP that stays
 * in INIT, so nothing it sends is ever acknowledged. It posts 4 receives and 16 RDMA WRITEs of which
 * only the last is signaled, then moves to the error state at once: 20 requests are outstanding.
 *  1. With a CQ of cq_entries() = 16 + 4 entries, all 20 arrive, every one IBV_WC_WR_FLUSH_ERR, and the
 *     device reports no asynchronous event.
 *  2. With a CQ sized by the wrong rule (signaled sends + receives = 1 + 4), fewer than 20 fit and the
 *     device reports IBV_EVENT_CQ_ERR. A device that rounds the CQ up to room for all 20 cannot show
 *     this; the case is then skipped.
 *
 * Output is TAP. Exit status 0 when every case passed, 1 otherwise, 2 for a bad command line. Every
 * wait is bounded by -t (default 30 s).
 *
 *     cq_flush [-d NAME] [-g INDEX] [-t SECONDS]
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/verbs.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace rdma_samples;

namespace {

constexpr QpCaps caps{.max_send_wr = 16, .max_recv_wr = 4};
constexpr int sends = static_cast<int>(caps.max_send_wr);
constexpr int receives = static_cast<int>(caps.max_recv_wr);
constexpr int signaled = 1;                // selective signaling: only the last WRITE of the 16
constexpr std::uint64_t recv_wr_id = 1000; // receives are numbered from here, sends from 0

/** What came back after the QP went to the error state. */
struct Flushed {
    int cqe = 0;          // the entries the device really gave the CQ (ibv_cq.cqe)
    int send_flushes = 0; // send completions with IBV_WC_WR_FLUSH_ERR
    int recv_flushes = 0; // receive completions with IBV_WC_WR_FLUSH_ERR
    int other = 0;        // completions with any other status
    std::string events;   // the device's asynchronous events, as text
};

/** Post 4 receives and 16 WRITEs (one signaled) on a QP whose peer never answers, move it to ERR, and
 *  take what arrives in a CQ of @p cq_size entries. */
Flushed flush_into(const Device &dev, ibv_pd *pd, ibv_mr *mr, int cq_size, int timeout_s)
{
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_size, nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd, cq.get(), caps);
    QpPtr peer = create_rc_qp(pd, cq.get(), caps); // left in INIT: it drops every packet, no ACK comes back
    qp_to_init(qp.get(), dev, 0);
    qp_to_init(peer.get(), dev, IBV_ACCESS_REMOTE_WRITE);
    const std::uint32_t psn = random_psn();
    qp_to_rtr(qp.get(), dev, describe_qp(peer.get(), dev, random_psn(), 0));
    qp_to_rts(qp.get(), psn);

    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(mr->addr);
    sge.length = 8;
    sge.lkey = mr->lkey;
    for (int i = 0; i < receives; ++i) {
        ibv_recv_wr rwr{};
        rwr.wr_id = recv_wr_id + static_cast<std::uint64_t>(i);
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        ibv_recv_wr *bad_recv = nullptr;
        check_post(ibv_post_recv(qp.get(), &rwr, &bad_recv), "ibv_post_recv");
    }
    std::vector<ibv_send_wr> wr(sends);
    for (int i = 0; i < sends; ++i) {
        wr[static_cast<std::size_t>(i)].wr_id = static_cast<std::uint64_t>(i);
        wr[static_cast<std::size_t>(i)].sg_list = &sge;
        wr[static_cast<std::size_t>(i)].num_sge = 1;
        wr[static_cast<std::size_t>(i)].opcode = IBV_WR_RDMA_WRITE;
        wr[static_cast<std::size_t>(i)].wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(mr->addr);
        wr[static_cast<std::size_t>(i)].wr.rdma.rkey = mr->rkey;
        wr[static_cast<std::size_t>(i)].next = i + 1 < sends ? &wr[static_cast<std::size_t>(i) + 1] : nullptr;
    }
    wr.back().send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_send = nullptr;
    check_post(ibv_post_send(qp.get(), wr.data(), &bad_send), "ibv_post_send(16 RDMA WRITEs, the last signaled)");
    qp_to_error(qp.get()); // every request still outstanding is flushed now

    Flushed f;
    f.cqe = cq->cqe;
    // Take completions until all 20 are in, or nothing new came for half a second after the device
    // reported an event (an overrun CQ takes no more), or -t runs out.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    auto last_news = std::chrono::steady_clock::now();
    while (f.send_flushes + f.recv_flushes + f.other < sends + receives &&
           std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 1) {
            last_news = std::chrono::steady_clock::now();
            if (wc.status != IBV_WC_WR_FLUSH_ERR)
                ++f.other;
            else if (wc.wr_id >= recv_wr_id)
                ++f.recv_flushes;
            else
                ++f.send_flushes;
            continue;
        }
        f.events += take_async_events(dev.ctx.get());
        if (!f.events.empty() && std::chrono::steady_clock::now() - last_news > std::chrono::milliseconds(500))
            break;
        std::this_thread::sleep_for(std::chrono::microseconds(200)); // rxe works on this same CPU
    }
    f.events += take_async_events(dev.ctx.get());
    return f;
}

std::string describe(const Flushed &f)
{
    return std::to_string(f.send_flushes) + " of " + std::to_string(sends) + " sends and " +
           std::to_string(f.recv_flushes) + " of " + std::to_string(receives) + " receives IBV_WC_WR_FLUSH_ERR, " +
           std::to_string(f.other) + " other, device events: " + (f.events.empty() ? "none" : f.events);
}

void run(const Args &args)
{
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    Buffer buf(4096);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                   "ibv_reg_mr"));
    std::printf("1..2\n# device %s; a QP with %d send slots (1 signaled WRITE in %d) and %d receives, moved to ERR\n",
                dev.name.c_str(), sends, sends, receives);
    int failed = 0;

    const Flushed rule = flush_into(dev, pd.get(), mr.get(), cq_entries(caps), args.timeout_s);
    const bool all =
        rule.send_flushes == sends && rule.recv_flushes == receives && rule.other == 0 && rule.events.empty();
    std::printf("%s 1 - CQ of cq_entries() = %d + %d (device gave %d): %s\n", all ? "ok" : "not ok", sends, receives,
                rule.cqe, describe(rule).c_str());
    failed += all ? 0 : 1;

    const int wrong = signaled + receives;
    const Flushed small = flush_into(dev, pd.get(), mr.get(), wrong, args.timeout_s);
    if (small.cqe >= sends + receives) {
        std::printf(
            "ok 2 - CQ sized by the signaled sends alone, %d + %d # SKIP the device gave %d entries, room for all\n",
            signaled, receives, small.cqe);
    } else {
        const bool overrun = small.events.find("IBV_EVENT_CQ_ERR") != std::string::npos &&
                             small.send_flushes + small.recv_flushes + small.other < sends + receives;
        std::printf("%s 2 - CQ sized by the signaled sends alone, %d + %d (device gave %d): overrun: %s\n",
                    overrun ? "ok" : "not ok", signaled, receives, small.cqe, describe(small).c_str());
        failed += overrun ? 0 : 1;
    }
    std::fflush(stdout);
    if (failed > 0)
        throw Error(std::to_string(failed) + " of 2 cases failed", "see the \"not ok\" lines above");
}

} // namespace

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "cq_flush",
                           .role = "cq_flush",
                           .summary = "Device test: unsignaled send requests complete too when their QP fails; "
                                      "a CQ needs room for every outstanding request. TAP output.",
                           .resource_descriptor = false};
    return run_sample(spec, argc, argv, run);
}
