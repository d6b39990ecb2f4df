/**
 * @file requester.cpp
 * @brief rdma_bench, requester side: measure one operation's bandwidth or latency, and the knobs that
 * make a verbs program fast (queue depth, selective signaling, inline, chains, batch polling, events).
 *
 * The set-up is the earlier lessons' (common library); what is new is the loop: keep many work
 * requests in flight, ask for few completions, and take them in batches. Run it beside perftest with
 * `./lab bench`.
 */
#include "bench_qp.hpp"
#include "cq_wait.hpp"
#include "options.hpp"
#include "stats.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/wait.hpp>

#include <arpa/inet.h>

#include <cstring>

using namespace rdma_samples;
using namespace rdma_bench;

namespace {

/** Everything the measuring loops touch. */
struct Bench {
    const Options &o;
    ibv_qp *qp;
    CompletionWaiter &waiter;
    SendQueue sq;
    ibv_sge sge;                 // our source (WRITE, SEND) or landing place (READ, atomic)
    ibv_send_wr base;            // the operation, filled once; only wr_id, flags and next change
    char *send_buf, *recv_buf;   // our two regions: what we send, where the peer's data lands
    std::uint64_t recvs_left = 0; // pongs still to come that need a receive posted
    std::uint32_t lkey = 0;
    std::vector<ibv_send_wr> chain{}; // room for one chain of --post-list requests
};

ibv_wc_opcode expected_opcode(Op op)
{
    switch (op) {
    case Op::read: return IBV_WC_RDMA_READ;
    case Op::send: return IBV_WC_SEND;
    case Op::atomic: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_RDMA_WRITE; // WRITE and WRITE with immediate
    }
}

//! [post_chain]
// Post n work requests, linked through `next`, with ONE ibv_post_send(): one call, one doorbell (the
// write that tells the device there is work) for the whole chain instead of one per request.
void post_chain(Bench &b, std::uint32_t n, std::uint32_t size, std::uint64_t first, std::uint64_t last)
{
    ibv_send_wr *wr = b.chain.data(); // allocated once: no malloc on the fast path
    b.sge.length = size;
    const bool can_inline = size <= b.o.inline_size && b.base.opcode != IBV_WR_RDMA_READ &&
                            b.base.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD;
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint64_t i = b.sq.posted + k;
        wr[k] = b.base;
        wr[k].wr_id = i; // its running number: a completion for it frees every slot up to it
        wr[k].send_flags = (b.sq.signaled(i, first, last) ? IBV_SEND_SIGNALED : 0) | (can_inline ? IBV_SEND_INLINE : 0);
        wr[k].next = k + 1 < n ? &wr[k + 1] : nullptr;
    }
    ibv_send_wr *bad = nullptr;
    // Build the error's text only on an error: a std::string per post (malloc, to_string, free) cost
    // ~800 instructions per operation, more than librxe's whole post (callgrind; chapter 9a).
    if (const int rc = ibv_post_send(b.qp, wr, &bad); rc != 0)
        check_rc(rc, "ibv_post_send(" + std::to_string(n) + " work requests)");
    b.sq.posted += n;
}
//! [post_chain]

// Take what the CQ has: send completions free slots; a receive (a pong) is counted and replaced.
int take_completions(Bench &b, const char *what)
{
    int pongs = 0;
    const int n = b.waiter.wait(what);
    for (int i = 0; i < n; ++i) {
        const ibv_wc &wc = b.waiter.wc(i);
        if (wc.status == IBV_WC_SUCCESS && (wc.opcode == IBV_WC_RECV || wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)) {
            ++pongs;
            if (b.recvs_left > 0 && b.recvs_left--)
                post_receives(b.qp, 1, reinterpret_cast<std::uintptr_t>(b.recv_buf), max_size, b.lkey);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != expected_opcode(b.o.op)) // the message only on failure
            check_wc(wc, expected_opcode(b.o.op), op_name(b.o.op));
        b.sq.completed(wc);
    }
    return pongs;
}

//! [bw_loop]
// Bandwidth: keep the send queue full. Post whenever there is room for a chain, then take whatever
// completions have arrived; time from the first post to the last completion.
void run_bw_phase(Bench &b, std::uint32_t size, std::uint64_t count)
{
    if (count == 0)
        return;
    const std::uint64_t first = b.sq.posted, last = first + count - 1;
    while (b.sq.done <= last) {
        while (b.sq.posted <= last) {
            const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(b.o.post_list, last + 1 - b.sq.posted));
            if (b.sq.room() < n)
                break;
            post_chain(b, n, size, first, last);
        }
        take_completions(b, "completions of our work requests");
    }
}
//! [bw_loop]

void measure_bw(Bench &b, std::uint32_t size)
{
    run_bw_phase(b, size, static_cast<std::uint64_t>(b.o.warmup));
    const double cpu0 = cpu_us();
    const std::int64_t t0 = now_ns();
    run_bw_phase(b, size, b.o.iters);
    print_bw_row(size, b.o.iters, now_ns() - t0, cpu_us() - cpu0);
}

//! [lat_loop]
// Latency: one operation at a time. WRITE, WRITE with immediate and SEND are ping-pongs (the responder
// answers in kind; we report half the round trip, as ib_write_lat and ib_send_lat do); READ and atomics
// are round trips by nature (reported whole, as ib_read_lat and ib_atomic_lat do).
void measure_lat(Bench &b, std::uint32_t size, std::uint64_t &tag)
{
    const bool ping_pong = b.o.op == Op::write || b.o.op == Op::write_imm || b.o.op == Op::send;
    const std::uint64_t first = b.sq.posted, last = first + b.o.per_size() - 1;
    std::vector<double> ns;
    double cpu0 = cpu_us();
    for (std::uint64_t k = 0; k < b.o.per_size(); ++k, ++tag) {
        if (k == static_cast<std::uint64_t>(b.o.warmup))
            cpu0 = cpu_us();
        const char t = static_cast<char>(tag % 250 + 1); // never 0, never the previous value
        while (b.sq.room() == 0)
            take_completions(b, "a send slot to free up");
        const std::int64_t t0 = now_ns();
        if (b.o.op == Op::write)
            b.send_buf[size - 1] = t; // the responder watches this byte; it answers by writing ours
        post_chain(b, 1, size, first, last);
        if (b.o.op == Op::write)
            wait_for_byte(b.recv_buf + size - 1, t, b.waiter.timeout_s());
        else if (ping_pong)
            while (take_completions(b, "the responder's answer") == 0) {
            }
        else
            while (b.sq.done < b.sq.posted)
                take_completions(b, "the round trip's completion");
        const std::int64_t t1 = now_ns();
        if (k >= static_cast<std::uint64_t>(b.o.warmup))
            ns.push_back(static_cast<double>(t1 - t0) / (ping_pong ? 2 : 1));
    }
    const double cpu = cpu_us() - cpu0;
    while (b.sq.done < b.sq.posted)
        take_completions(b, "the last completions");
    if (b.o.op == Op::write)
        b.send_buf[size - 1] = pattern(size - 1);
    print_lat_row(size, ns, cpu);
}
//! [lat_loop]

} // namespace

static void run(const Args &args)
{
    const Options &o = options();
    const auto sizes = o.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, GID index %d (%s)", dev.name.c_str(), dev.gid_index, gid_to_string(dev.gid).c_str());

    step(2, "register two %u-byte regions: what we send, and where the responder's data lands", region);
    Buffer buf(2 * static_cast<std::size_t>(region));
    for (std::uint32_t i = 0; i < region; ++i)
        buf.data()[i] = pattern(i);
    // Remote write on the landing region: the WRITE ping-pong's answer arrives there.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                   "ibv_reg_mr"));

    step(3, "create a completion queue%s and a QP: depth %u, signal every %u, inline up to %lld bytes",
         o.events ? " with a completion channel" : "", o.tx_depth, o.cq_mod, static_cast<long long>(o.inline_size));
    CompChannelPtr channel(o.events ? check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel") : nullptr);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), static_cast<int>(o.tx_depth + o.rx_depth + 4), nullptr, channel.get(), 0),
                   "ibv_create_cq"));
    QpPtr qp = create_bench_qp(pd.get(), cq.get(), o);
    Completions done(cq.get()); // the set-up's and the goodbye's waits (by wr_id); the loops poll themselves
    info("QPN 0x%06x", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its mmap descriptor"
                        : "exchange descriptors with the responder and move the QP to RTS");
    // READs and atomics in flight (perftest's -o): as many as the device allows, not the 16 of the
    // earlier lessons; with fewer, a deep --tx-depth of READs waits on this limit instead.
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_init_rd_atom, 255));
    Exchange x = connect_requester(args, dev, pd.get(), qp.get(), done, "the responder (rdma_bench_responder)",
                                   rd_atomic, ResourceKind::mmap);
    const ResourceDescriptor &peer = x.resource;
    if (peer.length < region)
        throw Error("the responder exports " + std::to_string(peer.length) + " bytes, less than the " +
                        std::to_string(region) + " we would move",
                    "start both sides with the same --size/--all");
    // The responder answers a ping-pong by writing into our landing region: grant remote write on the
    // QP (RTS -> RTS may change the access flags) and tell it where, with a SEND of our descriptor.
    ibv_qp_attr attr{};
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_ACCESS_FLAGS), "ibv_modify_qp(RTS, access remote_write)");
    ResourceDescriptor ours{ResourceKind::mmap, new_nonce(), {}, reinterpret_cast<std::uintptr_t>(buf.data() + region),
                            region, mr->rkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    send_descriptor(pd.get(), qp.get(), done, format_descriptor(ours), args.timeout_s);
    info("responder exports addr 0x%llx, length %u, rkey 0x%x; we sent ours in-band",
         static_cast<unsigned long long>(peer.addr), peer.length, peer.rkey);

    CompletionWaiter waiter(cq.get(), channel.get(), o.poll_batch, args.timeout_s);
    Bench b{o, qp.get(), waiter, SendQueue{0, 0, o.tx_depth, o.cq_mod}, {}, {}, buf.data(), buf.data() + region, 0,
            mr->lkey};
    b.chain.resize(o.post_list);
    const bool landing = o.op == Op::read || o.op == Op::atomic;
    b.sge = {reinterpret_cast<std::uintptr_t>(landing ? b.recv_buf : b.send_buf), 0, mr->lkey};
    b.base.sg_list = &b.sge;
    b.base.num_sge = 1;
    b.base.wr.rdma.remote_addr = peer.addr;
    b.base.wr.rdma.rkey = peer.rkey;
    switch (o.op) {
    case Op::write: b.base.opcode = IBV_WR_RDMA_WRITE; break;
    case Op::write_imm: b.base.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, b.base.imm_data = htonl(0xABCD); break;
    case Op::send: b.base.opcode = IBV_WR_SEND; break;
    case Op::read: b.base.opcode = IBV_WR_RDMA_READ; break;
    case Op::atomic:
        b.base.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        b.base.wr.atomic.remote_addr = peer.addr; // (a union with wr.rdma: set after it)
        b.base.wr.atomic.rkey = peer.rkey;
        b.base.wr.atomic.compare_add = 1;
        break;
    }
    if (o.mode == Mode::lat && landing)
        b.sq.cq_mod = 1; // a round trip is timed by its own completion: every one is signaled
    if (o.mode == Mode::lat && (o.op == Op::send || o.op == Op::write_imm)) {
        const std::uint64_t pongs = o.per_size() * sizes.size();
        const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, pongs));
        post_receives(qp.get(), n, reinterpret_cast<std::uintptr_t>(b.recv_buf), max_size, mr->lkey);
        b.recvs_left = pongs - n;
    }

    step(5, "measure %s %s: %u iterations per size after %lld warm-up, %s polling, batches of %u, chains of %u",
         op_name(o.op), o.mode == Mode::bw ? "bandwidth" : "latency", o.iters, static_cast<long long>(o.warmup),
         o.events ? "event" : "busy", o.poll_batch, o.post_list);
    o.mode == Mode::bw ? print_bw_header() : print_lat_header();
    std::uint64_t tag = 0;
    for (std::uint32_t size : sizes)
        o.mode == Mode::bw ? measure_bw(b, size) : measure_lat(b, size, tag);

    if (o.verify) {
        step(6, "verify the data");
        const bool echo = o.mode == Mode::lat && (o.op == Op::write || o.op == Op::write_imm || o.op == Op::send);
        std::uint64_t fetched = 0;
        std::memcpy(&fetched, b.recv_buf, sizeof fetched);
        if (o.op == Op::atomic && fetched != o.per_size() - 1)
            throw Error("the last fetch-and-add returned " + std::to_string(fetched) + ", expected " +
                            std::to_string(o.per_size() - 1),
                        "another requester may share the responder's counter");
        const std::uint32_t n = o.op == Op::read ? sizes.back() : echo ? sizes.back() - 1 : 0;
        for (std::uint32_t i = 0; i < n; ++i)
            if (b.recv_buf[i] != pattern(i))
                throw Error("byte " + std::to_string(i) + " of what came back differs from what was sent",
                            "the data was damaged or overwritten in flight");
        result("Verified: %s", o.op == Op::atomic ? "the counter went up by one per fetch-and-add"
                               : n > 0           ? "the bytes that came back are the ones expected"
                                                 : "the responder checks what arrived");
    }

    step(7, "say goodbye with a zero-length SEND: on RC it arrives after everything else");
    send_goodbye(qp.get(), done, args.timeout_s);
    if (args.use_cm) {
        step(8, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(x.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_bench_requester",
                     .role = "requester",
                     .summary = "rdma_bench, requester side: measure an operation's bandwidth or latency, as perftest does.",
                     .rdma_cm = true};
    add_bench_flags(spec);
    return run_bench(spec, argc, argv, run);
}
