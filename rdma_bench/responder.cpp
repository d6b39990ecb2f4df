/**
 * @file responder.cpp
 * @brief rdma_bench, responder side: export memory, post receives ahead, and answer the ping-pongs.
 *
 * For WRITE, READ and atomics in bandwidth mode the responder's CPU does nothing at all until the
 * goodbye: that is the point of one-sided operations. SEND and WRITE with immediate consume receives,
 * which it keeps posted ahead (--rx-depth). In latency mode it answers every ping in kind.
 * Start it with the same --op, --mode, --size/--all, --iters and --warmup as the requester.
 */
#include "bench_qp.hpp"
#include "connect.hpp"
#include "loop.hpp"
#include "support/options.hpp"
#include "support/stats.hpp"
#include "support/verify.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace rdma_samples;
using namespace rdma_bench;

namespace {

// Latency mode: answer each ping with the same operation, into the requester's landing region.
void answer_pings(Loop &loop)
{
    Lane &lane = loop.lanes.front(); // (one QP: --mode lat refuses -q)
    std::uint64_t tag = 0;
    for (std::uint32_t size : loop.opt.sizes()) {
        const std::uint64_t first = lane.sq.posted, last = first + loop.opt.per_size() - 1;
        for (std::uint64_t k = 0; k < loop.opt.per_size(); ++k, ++tag) {
            if (loop.opt.op == Op::write) // a WRITE gives us no completion: watch its last byte
                wait_for_byte(lane.landing + size - 1, ping_tag(tag), loop.waiter.timeout_s(), loop.waiter.yields());
            else // (a ping may already have been taken while we waited for a send slot: count them)
                while (lane.received <= tag)
                    take_completions(loop, "the requester's ping");
            while (lane.sq.room() == 0)
                take_completions(loop, "a send slot to free up");
            post_chain(loop, lane, 1, size, first, last);
        }
        while (lane.sq.done < lane.sq.posted)
            take_completions(loop, "the last pong's completion");
    }
}

} // namespace

static void run(const Args &args, const Options &opt)
{
    const auto sizes = opt.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);
    const bool two_sided = opt.op == Op::send || opt.op == Op::write_imm;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    // iWARP: RDMA CM only, no immediate data; atomics only where the device has them
    require_device_for(dev, args, opt);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    // Exactly what the operation needs from the requester, as in the earlier lessons.
    const int remote = opt.op == Op::read     ? IBV_ACCESS_REMOTE_READ
                       : opt.op == Op::atomic ? IBV_ACCESS_REMOTE_ATOMIC
                       : opt.op == Op::send   ? 0
                                              : IBV_ACCESS_REMOTE_WRITE;
    // -q N: each QP has a slice of `region` bytes of its own, so --verify can check each.
    const std::size_t slices = static_cast<std::size_t>(region) * opt.qps;
    step(2, "register a %zu-byte buffer, %u bytes per QP (local write + %s)", slices, region,
         access_to_string(remote).c_str());
    Buffer buf(slices);
    if (opt.op == Op::read)
        fill_pattern(buf.data(), slices, region); // what the requester will read
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | remote), "ibv_reg_mr"));

    step(3, "create a completion queue%s and %s: depth %u, inline up to %lld bytes",
         opt.events ? " with a completion channel" : "", qps_text(opt).c_str(), opt.tx_depth,
         static_cast<long long>(opt.inline_size));
    const bool passive = opt.op == Op::write || opt.op == Op::read || opt.op == Op::atomic
                             ? opt.mode == Mode::bw || opt.op != Op::write
                             : false; // one-sided and no ping-pong: our CPU has nothing to do
    CompChannelPtr channel(
        opt.events || passive ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel") : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_depth(opt), nullptr, channel.get(), 0), "ibv_create_cq"));
    std::vector<QpPtr> qps = create_bench_qps(dev, pd.get(), cq.get(), opt, remote);
    Completions completions(cq.get()); // the set-up's waits (by wr_id); the measuring loops poll themselves

    // Receives first, in the order the messages come: the requester's descriptor (on QP 0), then the
    // data (SEND, WRITE with immediate) and the goodbye, or only the goodbye. One receive queue is
    // consumed in order, so the goodbye (a zero-length SEND, chapter 2) takes the receive after the last
    // message of its QP. Each QP's receives point into its own slice.
    const std::uint64_t data_msgs = two_sided ? opt.per_size() * sizes.size() : 0; // per QP
    const auto ahead = static_cast<std::uint32_t>(std::min<std::uint64_t>(opt.rx_depth, data_msgs + 1));
    step(4, "post receives ahead: the requester's descriptor, then %u per QP for %s", ahead,
         two_sided ? "its messages and the goodbye" : "the goodbye");
    DescriptorReceive requester_desc(pd.get(), qps.front().get());
    for (std::uint32_t i = 0; i < opt.qps; ++i)
        post_receives(qps[i].get(), ahead, reinterpret_cast<std::uintptr_t>(buf.data() + std::size_t{region} * i),
                      max_size, mr->lkey);

    step(5, "%s", responder_connect_text(args).c_str());
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_rd_atom, 255); // (requester.cpp)
    ResourceDescriptor exported = describe_export(mr.get(), IBV_ACCESS_LOCAL_WRITE | remote, ResourceKind::mmap,
                                                  static_cast<std::uint32_t>(slices));
    std::vector<Exchange> exchanges = accept_qps(args, opt, dev, pd.get(), qps, completions, rd_atomic, exported);
    const ResourceDescriptor peer = landing_of(requester_desc.wait(completions, args.timeout_s), opt, slices);

    Loop loop(opt, CompletionWaiter(cq.get(), channel.get(), opt.poll_batch, args.timeout_s, opt.yield));
    loop.add_lanes(qps, peer, region, buf.data(), nullptr, mr->lkey); // (answers go from where pings land)
    for (Lane &lane : loop.lanes)
        lane.recvs_left = data_msgs + 1 - ahead;
    const bool ping_pong = opt.mode == Mode::lat && (opt.op == Op::write || two_sided);
    const std::string what =
        ping_pong ? "answer every ping in kind, then wait for the goodbye"
        : two_sided
            ? "take the requester's messages, replacing each receive, until the goodbye on each QP"
            : std::string("wait for the goodbye on each QP; the ") + op_name(opt.op) + " itself gives us no completion";
    step(6, "%s", what.c_str());
    // The set-up's waits may have polled the requester's first receives (its descriptor's SEND of ours
    // completed late: its ACK was lost and resent): they are the loop's, not lost.
    if (!passive)
        loop.waiter.adopt(completions, recv_wr_id);
    if (ping_pong)
        answer_pings(loop);
    //! [idle]
    // One-sided operations need nothing from our CPU, so do not spin, and do not wake up now and then
    // either: sleep on the completion channel until the goodbyes' completions (perftest's server sleeps
    // in a socket read). A responder that polls takes CPU time from the requester and from Soft-RoCE
    // when they share the machine's CPUs.
    if (passive) {
        CompletionWaiter sleeper(cq.get(), channel.get(), 1, args.timeout_s);
        sleeper.adopt(completions, recv_wr_id); // (the goodbyes, if the set-up polled them already)
        while (!loop.all_goodbyes()) {
            const ibv_wc &wc = sleeper.wc(sleeper.wait("the requester's goodbye (give -t longer than the run)") - 1);
            check_wc(wc, IBV_WC_RECV, "the requester's goodbye");
            loop.lane_of(wc).goodbye = true;
        }
    }
    //! [idle]
    while (!loop.all_goodbyes())
        take_completions(loop, "the requester's messages and goodbye");
    std::uint64_t received = 0;
    for (const Lane &lane : loop.lanes)
        received += lane.received;
    result("Responder served %llu messages", static_cast<unsigned long long>(received));

    if (opt.verify) {
        step(7, "verify what arrived in our memory");
        verify_responder(loop, data_msgs);
    }
    step(8, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QPs a moment: if our ACK of a goodbye was lost, the requester resends it");
    if (args.use_cm)
        for (Exchange &exchange : exchanges)
            close_as_responder(exchange, args.timeout_s);
    else // every QP lives until run() returns: one linger covers them all
        close_as_responder(exchanges.front(), args.timeout_s);
}

int main(int argc, char **argv)
{
    return bench_main({.name = "rdma_bench_responder",
                       .role = "responder",
                       .summary = "rdma_bench, responder side: export memory and answer the requester's measurement."},
                      argc, argv, run);
}
