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
    while (!loop.all_done(last)) {
        for (Lane &lane : loop.lanes)
            while (lane.sq.posted <= last) {
                const auto chain =
                    static_cast<std::uint32_t>(std::min<std::uint64_t>(loop.opt.post_list, last + 1 - lane.sq.posted));
                if (lane.sq.room() < chain)
                    break;
                post_chain(loop, lane, chain, size, first, last);
            }
        take_completions(loop, "completions of our work requests");
    }
}
//! [bw_loop]

void measure_bw(Loop &loop, std::uint32_t size)
{
    run_bw_phase(loop, size, static_cast<std::uint64_t>(loop.opt.warmup));
    const Stopwatch clock;
    std::uint64_t operations = 0;
    do { // --duration: whole rounds of --iters until the time is up (perftest -D)
        run_bw_phase(loop, size, loop.opt.iters);
        operations += static_cast<std::uint64_t>(loop.opt.iters) * loop.lanes.size(); // -q: one row for all QPs
    } while (clock.elapsed_ns() < static_cast<std::int64_t>(loop.opt.duration_s) * 1000000000);
    print_bw_row(size, operations, clock.elapsed_ns(), clock.cpu(), loop.opt.csv);
}

//! [lat_loop]
// Latency: one operation at a time. WRITE, WRITE with immediate and SEND are ping-pongs (the responder
// answers in kind; we report half the round trip, as ib_write_lat and ib_send_lat do); READ and atomics
// are round trips by nature (reported whole, as ib_read_lat and ib_atomic_lat do).
void measure_lat(Loop &loop, std::uint32_t size, std::uint64_t &tag)
{
    const Options &opt = loop.opt;
    const bool ping_pong = opt.op == Op::write || opt.op == Op::write_imm || opt.op == Op::send;
    Lane &lane = loop.lanes.front(); // (one QP: --mode lat refuses -q)
    const std::uint64_t first = lane.sq.posted, last = first + opt.per_size() - 1;
    std::vector<double> latencies_ns;
    Stopwatch clock; // restarted after the warm-up: the CPU time of the timed operations
    for (std::uint64_t k = 0; k < opt.per_size(); ++k, ++tag) {
        if (k == static_cast<std::uint64_t>(opt.warmup))
            clock.restart();
        const char ping = ping_tag(tag);
        while (lane.sq.room() == 0)
            take_completions(loop, "a send slot to free up");
        const std::int64_t start_ns = now_ns();
        if (opt.op == Op::write)
            lane.buf[size - 1] = ping; // the responder watches this byte; it answers by writing ours
        post_chain(loop, lane, 1, size, first, last);
        if (opt.op == Op::write)
            wait_for_byte(lane.landing + size - 1, ping, loop.waiter.timeout_s(), loop.waiter.yields());
        else if (ping_pong)
            while (take_completions(loop, "the responder's answer") == 0) {
            }
        else
            while (lane.sq.done < lane.sq.posted)
                take_completions(loop, "the round trip's completion");
        if (k >= static_cast<std::uint64_t>(opt.warmup))
            latencies_ns.push_back(static_cast<double>(now_ns() - start_ns) / (ping_pong ? 2 : 1));
    }
    const CpuTime cpu = clock.cpu();
    while (lane.sq.done < lane.sq.posted)
        take_completions(loop, "the last completions");
    if (opt.op == Op::write)
        lane.buf[size - 1] = pattern(size - 1);
    print_lat_row(size, latencies_ns, cpu, opt.csv);
}
//! [lat_loop]

} // namespace

static void run(const Args &args, const Options &opt)
{
    const auto sizes = opt.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    // iWARP: RDMA CM only, no immediate data; atomics only where the device has them
    require_device_for(dev, args, opt);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    // -q N: each QP has a slice of `region` bytes of its own on each side, so --verify can check each.
    const std::size_t slices = static_cast<std::size_t>(region) * opt.qps;
    step(2, "register two regions: %u bytes we send, and %zu where the responder's data lands (%u per QP)", region,
         slices, region);
    Buffer buf(region + slices);
    char *out = buf.data(), *landing = buf.data() + region;
    fill_pattern(out, region, region);
    // Least privilege: remote write on the landing region only when the responder writes into it, the
    // answers of a WRITE (or WRITE with immediate) ping-pong. A READ's or an atomic's response and a
    // received SEND are written there by our own device: local write is enough.
    // (On iWARP a READ's sink needs remote write as well: rdma_read's requester, step 2, says why.)
    const bool iwarp_read_sink = opt.op == Op::read && is_iwarp(dev);
    const int landing_access = opt.answers_by_write() || iwarp_read_sink ? IBV_ACCESS_REMOTE_WRITE : 0;
    MrPtr mr(
        check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | landing_access), "ibv_reg_mr"));

    step(3, "create a completion queue%s and %s: depth %u, signal every %u, inline up to %lld bytes",
         opt.events ? " with a completion channel" : "", qps_text(opt).c_str(), opt.tx_depth, opt.cq_mod,
         static_cast<long long>(opt.inline_size));
    CompChannelPtr channel(opt.events ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel")
                                      : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_depth(opt), nullptr, channel.get(), 0), "ibv_create_cq"));
    std::vector<QpPtr> qps = create_bench_qps(dev, pd.get(), cq.get(), opt, landing_access); // (the QP grants the same)
    Completions completions(cq.get()); // the set-up's and the goodbye's waits (by wr_id); not the loops'

    step(4, "%s", requester_connect_text(args, opt).c_str());
    // READs and atomics in flight (perftest's -o): as many as the device allows, not the 16 of the
    // earlier lessons; with fewer, a deep --tx-depth of READs waits on this limit instead.
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_init_rd_atom, 255);
    std::vector<Exchange> exchanges = connect_qps(args, opt, dev, pd.get(), qps, completions, rd_atomic, slices);
    const ResourceDescriptor &peer = exchanges.front().resource;
    // The responder answers a ping-pong by writing into our landing region: tell it where.
    send_landing(pd.get(), qps.front().get(), completions, mr.get(), landing, slices,
                 IBV_ACCESS_LOCAL_WRITE | landing_access, args.timeout_s);

    // READ and atomics bring the responder's data to us: their scatter/gather list is the landing region.
    const bool fetches = opt.op == Op::read || opt.op == Op::atomic;
    Loop loop(opt, CompletionWaiter(cq.get(), channel.get(), opt.poll_batch, args.timeout_s, opt.yield));
    loop.add_lanes(qps, peer, region, landing, fetches ? nullptr : out, mr->lkey);
    Lane &first = loop.lanes.front(); // (latency: the only one)
    if (opt.mode == Mode::lat && fetches)
        first.sq.cq_mod = 1; // a round trip is timed by its own completion: every one is signaled
    if (opt.mode == Mode::lat && (opt.op == Op::send || opt.op == Op::write_imm)) {
        // The responder answers each ping with a message: prepost receives for the answers.
        const std::uint64_t pongs = opt.per_size() * sizes.size();
        const auto ahead = static_cast<std::uint32_t>(std::min<std::uint64_t>(opt.rx_depth, pongs));
        post_receives(first.qp, ahead, reinterpret_cast<std::uintptr_t>(landing), max_size, mr->lkey);
        first.recvs_left = pongs - ahead;
    }

    step(5, "%s", measure_text(opt).c_str());
    print_header(opt);
    std::uint64_t tag = 0;
    for (std::uint32_t size : sizes)
        if (opt.mode == Mode::bw)
            measure_bw(loop, size);
        else
            measure_lat(loop, size, tag);

    if (opt.verify) {
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
    return bench_main({.name = "rdma_bench_requester",
                       .role = "requester",
                       .summary = "rdma_bench, requester side: measure an operation's bandwidth or latency, as "
                                  "perftest does."},
                      argc, argv, run);
}
