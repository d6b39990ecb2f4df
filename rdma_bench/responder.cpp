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
#include <rdma_samples/run_sample.hpp>

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

static void run(const Args &args, const Options &o)
{
    const auto sizes = o.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);
    const bool two_sided = o.op == Op::send || o.op == Op::write_imm;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    // Exactly what the operation needs from the requester, as in the earlier lessons.
    const int remote = o.op == Op::read     ? IBV_ACCESS_REMOTE_READ
                       : o.op == Op::atomic ? IBV_ACCESS_REMOTE_ATOMIC
                       : o.op == Op::send   ? 0
                                            : IBV_ACCESS_REMOTE_WRITE;
    // -q N: each QP has a slice of `region` bytes of its own, so --verify can check each.
    const std::size_t slices = static_cast<std::size_t>(region) * o.qps;
    step(2, "register a %zu-byte buffer, %u bytes per QP (local write + %s)", slices, region,
         access_to_string(remote).c_str());
    Buffer buf(slices);
    if (o.op == Op::read)
        for (std::size_t i = 0; i < slices; ++i)
            buf.data()[i] = pattern(static_cast<std::uint32_t>(i % region)); // what the requester will read
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | remote), "ibv_reg_mr"));

    step(3, "create a completion queue%s and %s: depth %u, inline up to %lld bytes",
         o.events ? " with a completion channel" : "", qps_text(o).c_str(), o.tx_depth,
         static_cast<long long>(o.inline_size));
    const bool passive = o.op == Op::write || o.op == Op::read || o.op == Op::atomic
                             ? o.mode == Mode::bw || o.op != Op::write
                             : false; // one-sided and no ping-pong: our CPU has nothing to do
    CompChannelPtr channel(
        o.events || passive ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel") : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), static_cast<int>(o.qps * (o.tx_depth + o.rx_depth + 4)), nullptr,
                                 channel.get(), 0),
                   "ibv_create_cq"));
    std::vector<QpPtr> qps = create_bench_qps(dev, pd.get(), cq.get(), o, remote);
    Completions completions(cq.get()); // the set-up's waits (by wr_id); the measuring loops poll themselves
    for (const QpPtr &qp : qps)
        info("QPN 0x%06x, state INIT", qp->qp_num);

    // Receives first, in the order the messages come: the requester's descriptor (on QP 0), then the
    // data (SEND, WRITE with immediate) and the goodbye, or only the goodbye. One receive queue is
    // consumed in order, so the goodbye (a zero-length SEND, chapter 2) takes the receive after the last
    // message of its QP. Each QP's receives point into its own slice.
    const std::uint64_t data_msgs = two_sided ? o.per_size() * sizes.size() : 0; // per QP
    const auto ahead = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, data_msgs + 1));
    step(4, "post receives ahead: the requester's descriptor, then %u per QP for %s", ahead,
         two_sided ? "its messages and the goodbye" : "the goodbye");
    DescriptorReceive requester_desc(pd.get(), qps.front().get());
    for (std::uint32_t i = 0; i < o.qps; ++i)
        post_receives(qps[i].get(), ahead, reinterpret_cast<std::uintptr_t>(buf.data() + std::size_t{region} * i),
                      max_size, mr->lkey);

    step(
        5,
        args.use_cm
            ? "wait for the requester to connect with RDMA CM (a connection per QP, on ports -lp and up), then SEND it our mmap descriptor"
            : "wait for the requester, move the QPs to RTR and RTS, export the buffer");
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_rd_atom, 255); // (requester.cpp)
    ResourceDescriptor exported = describe_export(mr.get(), IBV_ACCESS_LOCAL_WRITE | remote, ResourceKind::mmap,
                                                  static_cast<std::uint32_t>(slices));
    std::vector<Exchange> exchanges;
    for (std::uint32_t i = 0; i < o.qps; ++i) // the buffer is exported once, to QP 0
        exchanges.push_back(accept_requester(args_for_qp(args, i, o.qps), dev, pd.get(), qps[i].get(), completions,
                                             "the requester (rdma_bench_requester)", rd_atomic,
                                             i == 0 ? &exported : nullptr));
    const ResourceDescriptor peer = parse_resource_descriptor(requester_desc.wait(completions, args.timeout_s),
                                                              "the requester's SEND", ResourceKind::mmap);
    info("requester's landing region: addr 0x%llx, length %u, rkey 0x%x", static_cast<unsigned long long>(peer.addr),
         peer.length, peer.rkey);
    // A WRITE ping-pong answers into that region: only inside what the requester exported, and only if
    // it granted remote write (the requester checks our export the same way).
    if (o.answers_by_write() && (peer.length < slices || !(peer.access & IBV_ACCESS_REMOTE_WRITE)))
        throw Error("the requester's landing region (" + std::to_string(peer.length) + " bytes, " +
                        access_to_string(peer.access) + ") cannot take our " + std::to_string(slices) +
                        "-byte answers by remote write",
                    "start both sides with the same --op, --mode, --size/--all and -q");

    Loop loop(o, CompletionWaiter(cq.get(), channel.get(), o.poll_batch, args.timeout_s, o.yield));
    for (std::uint32_t i = 0; i < o.qps; ++i) {
        const std::size_t slice = static_cast<std::size_t>(region) * i; // QP i's place on both sides
        loop.lanes.emplace_back(o, qps[i].get(), operation_wr(o.op, o.cas, peer.addr + slice, peer.rkey),
                                buf.data() + slice, buf.data() + slice, mr->lkey);
        loop.lanes.back().recvs_left = data_msgs + 1 - ahead;
    }
    const bool ping_pong = o.mode == Mode::lat && (o.op == Op::write || two_sided);
    const std::string what =
        ping_pong ? "answer every ping in kind, then wait for the goodbye"
        : two_sided
            ? "take the requester's messages, replacing each receive, until the goodbye on each QP"
            : std::string("wait for the goodbye on each QP; the ") + op_name(o.op) + " itself gives us no completion";
    step(6, "%s", what.c_str());
    if (ping_pong)
        answer_pings(loop);
    //! [idle]
    // One-sided operations need nothing from our CPU, so do not spin, and do not wake up now and then
    // either: sleep on the completion channel until the goodbyes' completions (perftest's server sleeps
    // in a socket read). A responder that polls takes CPU time from the requester and from Soft-RoCE
    // when they share the machine's CPUs.
    if (passive) {
        CompletionWaiter sleeper(cq.get(), channel.get(), 1, args.timeout_s);
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

    if (o.verify) {
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
    ProgramSpec spec{.name = "rdma_bench_responder",
                     .role = "responder",
                     .summary = "rdma_bench, responder side: export memory and answer the requester's measurement.",
                     .rdma_cm = true};
    Options opt;
    add_bench_flags(spec, opt);
    return run_sample(spec, argc, argv, [&](const Args &args) {
        finish(opt); // defaults that depend on other knobs, and knobs that contradict each other (exit 2)
        args_for_qp(args, opt.qps - 1, opt.qps); // (-cm -q N: the last QP's port exists, or exit 2 now)
        run(args, opt);
    });
}
