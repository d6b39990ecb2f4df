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
#include "options.hpp"
#include "stats.hpp"
#include "verify.hpp"

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

using namespace rdma_samples;
using namespace rdma_bench;

namespace {

// Latency mode: answer each ping with the same operation, into the requester's landing region.
void answer_pings(Loop &loop)
{
    std::uint64_t tag = 0;
    for (std::uint32_t size : loop.opt.sizes()) {
        const std::uint64_t first = loop.sq.posted, last = first + loop.opt.per_size() - 1;
        for (std::uint64_t k = 0; k < loop.opt.per_size(); ++k, ++tag) {
            if (loop.opt.op == Op::write) // a WRITE gives us no completion: watch its last byte
                wait_for_byte(loop.landing + size - 1, ping_tag(tag), loop.waiter.timeout_s(), loop.waiter.yields());
            else // (a ping may already have been taken while we waited for a send slot: count them)
                while (loop.received <= tag)
                    take_completions(loop, "the requester's ping");
            while (loop.sq.room() == 0)
                take_completions(loop, "a send slot to free up");
            post_chain(loop, 1, size, first, last);
        }
        while (loop.sq.done < loop.sq.posted)
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
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index, gid_to_string(dev.gid).c_str());

    // Exactly what the operation needs from the requester, as in the earlier lessons.
    const int remote = o.op == Op::read     ? IBV_ACCESS_REMOTE_READ
                       : o.op == Op::atomic ? IBV_ACCESS_REMOTE_ATOMIC
                       : o.op == Op::send   ? 0
                                            : IBV_ACCESS_REMOTE_WRITE;
    step(2, "register a %u-byte buffer (local write + %s)", region, access_to_string(remote).c_str());
    Buffer buf(region);
    if (o.op == Op::read)
        for (std::uint32_t i = 0; i < region; ++i)
            buf.data()[i] = pattern(i); // what the requester will read
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | remote), "ibv_reg_mr"));

    step(3, "create a completion queue%s and a QP: depth %u, inline up to %lld bytes",
         o.events ? " with a completion channel" : "", o.tx_depth, static_cast<long long>(o.inline_size));
    const bool passive = o.op == Op::write || o.op == Op::read || o.op == Op::atomic
                             ? o.mode == Mode::bw || o.op != Op::write
                             : false; // one-sided and no ping-pong: our CPU has nothing to do
    CompChannelPtr channel(o.events || passive ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel") : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), static_cast<int>(o.tx_depth + o.rx_depth + 4), nullptr, channel.get(), 0),
                   "ibv_create_cq"));
    QpPtr qp = create_bench_qp(pd.get(), cq.get(), o);
    qp_to_init(qp.get(), dev, remote);
    Completions completions(cq.get()); // the set-up's waits (by wr_id); the measuring loops poll themselves
    info("QPN 0x%06x, state INIT", qp->qp_num);

    // Receives first, in the order the messages come: the requester's descriptor, then the data
    // (SEND, WRITE with immediate) and the goodbye, or only the goodbye. One receive queue is consumed
    // in order, so the goodbye (a zero-length SEND, chapter 2) takes the receive after the last message.
    const std::uint64_t data_msgs = two_sided ? o.per_size() * sizes.size() : 0;
    const auto ahead = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, data_msgs + 1));
    step(4, "post receives ahead: the requester's descriptor, then %u for %s", ahead,
         two_sided ? "its messages and the goodbye" : "the goodbye");
    DescriptorReceive requester_desc(pd.get(), qp.get());
    post_receives(qp.get(), ahead, reinterpret_cast<std::uintptr_t>(buf.data()), max_size, mr->lkey);

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our mmap descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the buffer");
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_rd_atom, 255)); // (requester.cpp)
    ResourceDescriptor exported{};
    exported.kind = ResourceKind::mmap;
    exported.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    exported.length = region;
    exported.rkey = mr->rkey;
    exported.access = IBV_ACCESS_LOCAL_WRITE | remote;
    Exchange exchange = accept_requester(args, dev, pd.get(), qp.get(), completions, "the requester (rdma_bench_requester)",
                                  rd_atomic, &exported);
    const ResourceDescriptor peer = parse_resource_descriptor(requester_desc.wait(completions, args.timeout_s),
                                                              "the requester's SEND", ResourceKind::mmap);
    info("requester's landing region: addr 0x%llx, length %u, rkey 0x%x", static_cast<unsigned long long>(peer.addr),
         peer.length, peer.rkey);

    Loop loop(o, qp.get(), CompletionWaiter(cq.get(), channel.get(), o.poll_batch, args.timeout_s, o.yield), operation_wr(o.op, o.cas, peer),
           buf.data(), buf.data(), mr->lkey);
    loop.recvs_left = data_msgs + 1 - ahead;
    const bool ping_pong = o.mode == Mode::lat && (o.op == Op::write || two_sided);
    const std::string what = ping_pong ? "answer every ping in kind, then wait for the goodbye"
                             : two_sided ? "take the requester's messages, replacing each receive, until the goodbye"
                                         : std::string("wait for the goodbye; the ") + op_name(o.op) +
                                               " itself gives us no completion";
    step(6, "%s", what.c_str());
    if (ping_pong)
        answer_pings(loop);
    //! [idle]
    // One-sided operations need nothing from our CPU, so do not spin, and do not wake up now and then
    // either: sleep on the completion channel until the goodbye's completion (perftest's server sleeps
    // in a socket read). A responder that polls takes CPU time from the requester and from Soft-RoCE
    // when they share the machine's CPUs.
    if (passive) {
        CompletionWaiter sleeper(cq.get(), channel.get(), 1, args.timeout_s);
        while (!loop.goodbye) {
            const ibv_wc &wc = sleeper.wc(sleeper.wait("the requester's goodbye (give -t longer than the run)") - 1);
            check_wc(wc, IBV_WC_RECV, "the requester's goodbye");
            loop.goodbye = true;
        }
    }
    //! [idle]
    while (!loop.goodbye)
        take_completions(loop, "the requester's messages and goodbye");
    result("Responder served %llu messages", static_cast<unsigned long long>(loop.received));

    if (o.verify) {
        step(7, "verify what arrived in our memory");
        verify_responder(loop, data_msgs);
    }
    step(8, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
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
        run(args, opt);
    });
}
