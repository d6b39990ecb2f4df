/**
 * @file requester.cpp
 * @brief rdma_bench, requester side: measure one operation's bandwidth or latency, and the knobs that
 * make a verbs program fast (queue depth, selective signaling, inline, chains, batch polling, events).
 *
 * The set-up is the earlier lessons'; what is new is the loop: keep many work requests in flight, ask
 * for few completions, and take them in batches. Both sides post and take completions the same way
 * (loop.hpp, cq_wait.hpp). Run it beside perftest with `./lab bench`.
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
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace rdma_samples;
using namespace rdma_bench;

namespace {

//! [bw_loop]
// Bandwidth: keep the send queues full. Post whenever there is room for a chain, then take whatever
// completions have arrived; time from the first post to the last completion. With -q N, each of the N
// QPs carries `count` messages: fill each one's queue in turn (round robin, as perftest does); their
// completions come through the one CQ they share.
void run_bw_phase(Loop &loop, std::uint32_t size, std::uint64_t count)
{
    if (count == 0)
        return;
    // Every QP has posted (and completed) as many requests as the others: the phase's numbers are theirs all.
    const std::uint64_t first = loop.lanes.front().sq.posted, last = first + count - 1;
    auto finished = [&] {
        return std::all_of(loop.lanes.begin(), loop.lanes.end(), [&](const Lane &lane) { return lane.sq.done > last; });
    };
    while (!finished()) {
        for (Lane &lane : loop.lanes)
            while (lane.sq.posted <= last) {
                const auto n =
                    static_cast<std::uint32_t>(std::min<std::uint64_t>(loop.opt.post_list, last + 1 - lane.sq.posted));
                if (lane.sq.room() < n)
                    break;
                post_chain(loop, lane, n, size, first, last);
            }
        take_completions(loop, "completions of our work requests");
    }
}
//! [bw_loop]

void measure_bw(Loop &loop, std::uint32_t size)
{
    run_bw_phase(loop, size, static_cast<std::uint64_t>(loop.opt.warmup));
    const CpuTime cpu0 = cpu_us();
    const std::int64_t t0 = now_ns();
    std::uint64_t operations = 0;
    do { // --duration: whole rounds of --iters until the time is up (perftest -D)
        run_bw_phase(loop, size, loop.opt.iters);
        operations += static_cast<std::uint64_t>(loop.opt.iters) * loop.lanes.size(); // -q: one row for all QPs
    } while (now_ns() - t0 < static_cast<std::int64_t>(loop.opt.duration_s) * 1000000000);
    print_bw_row(size, operations, now_ns() - t0, cpu_us() - cpu0, loop.opt.csv);
}

//! [lat_loop]
// Latency: one operation at a time. WRITE, WRITE with immediate and SEND are ping-pongs (the responder
// answers in kind; we report half the round trip, as ib_write_lat and ib_send_lat do); READ and atomics
// are round trips by nature (reported whole, as ib_read_lat and ib_atomic_lat do).
void measure_lat(Loop &loop, std::uint32_t size, std::uint64_t &tag)
{
    const bool ping_pong = loop.opt.op == Op::write || loop.opt.op == Op::write_imm || loop.opt.op == Op::send;
    Lane &lane = loop.lanes.front(); // (one QP: --mode lat refuses -q)
    const std::uint64_t first = lane.sq.posted, last = first + loop.opt.per_size() - 1;
    std::vector<double> ns;
    CpuTime cpu0 = cpu_us();
    for (std::uint64_t k = 0; k < loop.opt.per_size(); ++k, ++tag) {
        if (k == static_cast<std::uint64_t>(loop.opt.warmup))
            cpu0 = cpu_us();
        const char t = ping_tag(tag);
        while (lane.sq.room() == 0)
            take_completions(loop, "a send slot to free up");
        const std::int64_t t0 = now_ns();
        if (loop.opt.op == Op::write)
            lane.buf[size - 1] = t; // the responder watches this byte; it answers by writing ours
        post_chain(loop, lane, 1, size, first, last);
        if (loop.opt.op == Op::write)
            wait_for_byte(lane.landing + size - 1, t, loop.waiter.timeout_s(), loop.waiter.yields());
        else if (ping_pong)
            while (take_completions(loop, "the responder's answer") == 0) {
            }
        else
            while (lane.sq.done < lane.sq.posted)
                take_completions(loop, "the round trip's completion");
        const std::int64_t t1 = now_ns();
        if (k >= static_cast<std::uint64_t>(loop.opt.warmup))
            ns.push_back(static_cast<double>(t1 - t0) / (ping_pong ? 2 : 1));
    }
    const CpuTime cpu = cpu_us() - cpu0;
    while (lane.sq.done < lane.sq.posted)
        take_completions(loop, "the last completions");
    if (loop.opt.op == Op::write)
        lane.buf[size - 1] = pattern(size - 1);
    print_lat_row(size, ns, cpu, loop.opt.csv);
}
//! [lat_loop]

} // namespace

static void run(const Args &args, const Options &o)
{
    const auto sizes = o.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    // -q N: each QP has a slice of `region` bytes of its own on each side, so --verify can check each.
    const std::size_t slices = static_cast<std::size_t>(region) * o.qps;
    step(2, "register two regions: %u bytes we send, and %zu where the responder's data lands (%u per QP)", region,
         slices, region);
    Buffer buf(region + slices);
    char *out = buf.data(), *landing = buf.data() + region;
    for (std::uint32_t i = 0; i < region; ++i)
        out[i] = pattern(i);
    // Least privilege: remote write on the landing region only when the responder writes into it, the
    // answers of a WRITE (or WRITE with immediate) ping-pong. A READ's or an atomic's response and a
    // received SEND are written there by our own device: local write is enough.
    const int landing_access = o.answers_by_write() ? IBV_ACCESS_REMOTE_WRITE : 0;
    MrPtr mr(
        check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | landing_access), "ibv_reg_mr"));

    step(3, "create a completion queue%s and %s: depth %u, signal every %u, inline up to %lld bytes",
         o.events ? " with a completion channel" : "", qps_text(o).c_str(), o.tx_depth, o.cq_mod,
         static_cast<long long>(o.inline_size));
    CompChannelPtr channel(o.events ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel")
                                    : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), static_cast<int>(o.qps * (o.tx_depth + o.rx_depth + 4)), nullptr,
                                 channel.get(), 0),
                   "ibv_create_cq"));
    std::vector<QpPtr> qps = create_bench_qps(dev, pd.get(), cq.get(), o, landing_access); // (the QP grants the same)
    // the set-up's and the goodbye's poll loops (by wr_id); the measuring loops poll themselves
    Completions completions(cq.get());
    for (const QpPtr &qp : qps)
        info("QPN 0x%06x, state INIT", qp->qp_num);

    if (o.qps == 1)
        step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its mmap descriptor"
                            : "exchange descriptors with the responder and move the QP to RTS");
    else
        step(
            4,
            args.use_cm
                ? "connect to the responder with RDMA CM (a connection per QP, on ports -lp and up); it SENDs its mmap descriptor"
                : "exchange descriptors with the responder (a pair per QP) and move the QPs to RTS");
    // READs and atomics in flight (perftest's -o): as many as the device allows, not the 16 of the
    // earlier lessons; with fewer, a deep --tx-depth of READs waits on this limit instead.
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_init_rd_atom, 255);
    std::vector<Exchange> exchanges;
    for (std::uint32_t i = 0; i < o.qps; ++i) // the responder exports its memory once, to QP 0
        exchanges.push_back(connect_to_responder(args_for_qp(args, i, o.qps), dev, pd.get(), qps[i].get(), completions,
                                                 "the responder (rdma_bench_responder)", rd_atomic,
                                                 i == 0 ? std::optional(ResourceKind::mmap) : std::nullopt));
    const ResourceDescriptor &peer = exchanges.front().resource;
    if (peer.length < slices)
        throw Error("the responder exports " + std::to_string(peer.length) + " bytes, less than the " +
                        std::to_string(slices) + " we would move",
                    "start both sides with the same --size/--all and -q");
    // The responder answers a ping-pong by writing into our landing region: tell it where, with a SEND
    // of our own descriptor (it posted the receive before we connected).
    const ResourceDescriptor ours{.kind = ResourceKind::mmap,
                                  .nonce = new_nonce(),
                                  .peer_nonce = {},
                                  .addr = reinterpret_cast<std::uintptr_t>(landing),
                                  .length = static_cast<std::uint32_t>(slices),
                                  .rkey = mr->rkey,
                                  .access = IBV_ACCESS_LOCAL_WRITE | landing_access};
    send_descriptor(pd.get(), qps.front().get(), completions, format_descriptor(ours), args.timeout_s);
    info("responder exports addr 0x%llx, length %u, rkey 0x%x; we sent ours in-band",
         static_cast<unsigned long long>(peer.addr), peer.length, peer.rkey);

    // READ and atomics bring the responder's data to us: their scatter/gather list is the landing region.
    const bool fetches = o.op == Op::read || o.op == Op::atomic;
    Loop loop(o, CompletionWaiter(cq.get(), channel.get(), o.poll_batch, args.timeout_s, o.yield));
    for (std::uint32_t i = 0; i < o.qps; ++i) {
        const std::size_t slice = static_cast<std::size_t>(region) * i; // QP i's place on both sides
        loop.lanes.emplace_back(o, qps[i].get(), operation_wr(o.op, o.cas, peer.addr + slice, peer.rkey),
                                fetches ? landing + slice : out, landing + slice, mr->lkey);
    }
    Lane &first = loop.lanes.front(); // (latency: the only one)
    if (o.mode == Mode::lat && fetches)
        first.sq.cq_mod = 1; // a round trip is timed by its own completion: every one is signaled
    if (o.mode == Mode::lat && (o.op == Op::send || o.op == Op::write_imm)) {
        // The responder answers each ping with a message: prepost receives for the answers.
        const std::uint64_t pongs = o.per_size() * sizes.size();
        const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, pongs));
        post_receives(first.qp, n, reinterpret_cast<std::uintptr_t>(landing), max_size, mr->lkey);
        first.recvs_left = pongs - n;
    }

    step(5, "measure %s %s: %u iterations per size%s after %lld warm-up, %s polling, batches of %u, chains of %u",
         op_name(o.op), o.mode == Mode::bw ? "bandwidth" : "latency", o.iters,
         o.qps > 1 ? (" on each of " + std::to_string(o.qps) + " QPs").c_str() : "", static_cast<long long>(o.warmup),
         o.events ? "event" : "busy", o.poll_batch, o.post_list);
    if (o.mode == Mode::bw)
        print_bw_header(o.csv);
    else
        print_lat_header(o.csv);
    std::uint64_t tag = 0;
    for (std::uint32_t size : sizes)
        if (o.mode == Mode::bw)
            measure_bw(loop, size);
        else
            measure_lat(loop, size, tag);

    if (o.verify) {
        step(6, "verify the data");
        verify_requester(loop);
    }

    step(7, "say goodbye with a zero-length SEND on each QP: on RC it arrives after everything else on it");
    for (const QpPtr &qp : qps)
        say_goodbye(qp.get(), completions, args.timeout_s); // chapter 2, step 8, written out

    if (args.use_cm) {
        step(8, "disconnect: RDMA CM tells the responder we are done");
        for (Exchange &exchange : exchanges)
            cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_bench_requester",
                     .role = "requester",
                     .summary =
                         "rdma_bench, requester side: measure an operation's bandwidth or latency, as perftest does.",
                     .rdma_cm = true};
    Options opt;
    add_bench_flags(spec, opt);
    return run_sample(spec, argc, argv, [&](const Args &args) {
        finish(opt); // defaults that depend on other knobs, and knobs that contradict each other (exit 2)
        args_for_qp(args, opt.qps - 1, opt.qps); // (-cm -q N: the last QP's port exists, or exit 2 now)
        run(args, opt);
    });
}
