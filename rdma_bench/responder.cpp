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
#include "cq_wait.hpp"
#include "options.hpp"
#include "stats.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/cm.hpp>
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

/** What the serving loop touches. */
struct Serve {
    const Options &o;
    ibv_qp *qp;
    CompletionWaiter &waiter;
    SendQueue sq;
    ibv_sge sge;               // our buffer: where the requester's data lands, and what a pong sends
    ibv_send_wr pong;          // the answer in kind (latency mode)
    std::uint64_t recvs_left;  // receives still to post (data messages and the goodbye)
    std::uint64_t messages = 0; // data messages received
    bool goodbye = false;
    bool bad_imm = false;
};

// Take completions: count and replace consumed receives, note the goodbye, free send slots.
int take(Serve &s, const char *what)
{
    int got = 0;
    const int n = s.waiter.wait(what);
    for (int i = 0; i < n; ++i) {
        const ibv_wc &wc = s.waiter.wc(i);
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE) {
            s.sq.completed(wc);
            continue;
        }
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND) {
            s.sq.completed(wc);
            continue;
        }
        // Build the message only on failure: this is the fast path. (Any other opcode is an error, as before.)
        if (wc.status != IBV_WC_SUCCESS || (wc.opcode != IBV_WC_RECV && wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM))
            check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.opcode == IBV_WC_RECV && wc.byte_len == 0) {
            s.goodbye = true; // the requester's zero-length SEND: everything before it has arrived
            continue;
        }
        ++s.messages;
        ++got;
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(wc.imm_data) != 0xABCD)
            s.bad_imm = true;
        //! [repost]
        // A consumed receive is replaced at once, so the sender never finds the queue empty (RNR).
        if (s.recvs_left > 0) {
            post_receives(s.qp, 1, s.sge.addr, max_size, s.sge.lkey);
            --s.recvs_left;
        }
        //! [repost]
    }
    return got;
}

// Latency mode: answer each ping with the same operation, into the requester's landing region.
void answer_pings(Serve &s, char *buf)
{
    std::uint64_t tag = 0;
    for (std::uint32_t size : s.o.sizes()) {
        const std::uint64_t first = s.sq.posted, last = first + s.o.per_size() - 1;
        s.sge.length = size;
        for (std::uint64_t k = 0; k < s.o.per_size(); ++k, ++tag) {
            if (s.o.op == Op::write)
                wait_for_byte(buf + size - 1, static_cast<char>(tag % 250 + 1), s.waiter.timeout_s());
            else // (a ping may already have been taken while we waited for a send slot: count them)
                while (s.messages <= tag)
                    take(s, "the requester's ping");
            while (s.sq.room() == 0)
                take(s, "a send slot to free up");
            ibv_send_wr wr = s.pong;
            wr.wr_id = s.sq.posted;
            wr.send_flags = (s.sq.signaled(s.sq.posted, first, last) ? IBV_SEND_SIGNALED : 0) |
                            (size <= s.o.inline_size ? IBV_SEND_INLINE : 0);
            ibv_send_wr *bad = nullptr;
            if (const int rc = ibv_post_send(s.qp, &wr, &bad); rc != 0) // no std::string per post
                check_rc(rc, "ibv_post_send(pong)");
            ++s.sq.posted;
        }
        while (s.sq.done < s.sq.posted)
            take(s, "the last pong's completion");
    }
}

} // namespace

static void run(const Args &args)
{
    const Options &o = options();
    const auto sizes = o.sizes();
    const std::uint32_t region = std::max<std::uint32_t>(sizes.back(), 8);
    const bool two_sided = o.op == Op::send || o.op == Op::write_imm;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, GID index %d (%s)", dev.name.c_str(), dev.gid_index, gid_to_string(dev.gid).c_str());

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
    Completions done(cq.get()); // the set-up's waits (by wr_id); the loops poll themselves
    qp_to_init(qp.get(), dev, remote);
    info("QPN 0x%06x, state INIT", qp->qp_num);

    // Receives first, in the order the messages come: the requester's descriptor, then the data
    // (SEND, WRITE with immediate) or only the goodbye.
    const std::uint64_t data_msgs = two_sided ? o.per_size() * sizes.size() : 0;
    const auto ahead = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, data_msgs + 1));
    step(4, "post receives ahead: the requester's descriptor, then %u for %s", ahead,
         two_sided ? "its messages and the goodbye" : "the goodbye");
    DescriptorReceive requester_desc(pd.get(), qp.get());
    post_receives(qp.get(), ahead, reinterpret_cast<std::uintptr_t>(buf.data()), max_size, mr->lkey);

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our mmap descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the buffer");
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_rd_atom, 255)); // (requester.cpp)
    ResourceDescriptor mmap{};
    mmap.kind = ResourceKind::mmap;
    mmap.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    mmap.length = region;
    mmap.rkey = mr->rkey;
    mmap.access = IBV_ACCESS_LOCAL_WRITE | remote;
    Exchange x = accept_requester(args, dev, pd.get(), qp.get(), done, "the requester (rdma_bench_requester)",
                                  rd_atomic, &mmap);
    const ResourceDescriptor peer = parse_resource_descriptor(requester_desc.wait(done, args.timeout_s),
                                                              "the requester's SEND", ResourceKind::mmap);
    info("requester's landing region: addr 0x%llx, length %u, rkey 0x%x", static_cast<unsigned long long>(peer.addr),
         peer.length, peer.rkey);

    CompletionWaiter waiter(cq.get(), channel.get(), o.poll_batch, args.timeout_s);
    Serve s{o, qp.get(), waiter, SendQueue{0, 0, o.tx_depth, o.cq_mod}, {reinterpret_cast<std::uintptr_t>(buf.data()), 0, mr->lkey},
            {}, data_msgs + 1 - ahead};
    s.pong.sg_list = &s.sge;
    s.pong.num_sge = 1;
    s.pong.opcode = o.op == Op::send ? IBV_WR_SEND : o.op == Op::write_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    s.pong.imm_data = htonl(0xABCD);
    s.pong.wr.rdma.remote_addr = peer.addr;
    s.pong.wr.rdma.rkey = peer.rkey;

    const bool ping_pong = o.mode == Mode::lat && (o.op == Op::write || two_sided);
    const std::string what = ping_pong ? "answer every ping in kind, then wait for the goodbye"
                             : two_sided ? "take the requester's messages, replacing each receive, until the goodbye"
                                         : std::string("wait for the goodbye; the ") + op_name(o.op) +
                                               " itself gives us no completion";
    step(6, "%s", what.c_str());
    if (ping_pong)
        answer_pings(s, buf.data());
    //! [idle]
    // One-sided operations need nothing from our CPU, so do not spin, and do not wake up now and then
    // either: sleep on the completion channel until the goodbye's completion (perftest's server sleeps
    // in a socket read). A responder that polls takes CPU time from the requester and from Soft-RoCE
    // when they share the machine's CPUs.
    if (passive) {
        CompletionWaiter sleeper(cq.get(), channel.get(), 1, args.timeout_s);
        while (!s.goodbye) {
            const ibv_wc &wc = sleeper.wc(sleeper.wait("the requester's goodbye (give -t longer than the run)") - 1);
            check_wc(wc, IBV_WC_RECV, "the requester's goodbye");
            s.goodbye = true;
        }
    }
    //! [idle]
    while (!s.goodbye)
        take(s, "the requester's messages and goodbye");
    result("Responder served %llu messages", static_cast<unsigned long long>(two_sided ? s.messages : 0));

    if (o.verify) {
        step(7, "verify what arrived in our memory");
        std::uint64_t counter = 0;
        std::memcpy(&counter, buf.data(), sizeof counter);
        const std::uint32_t n = o.op == Op::atomic || o.op == Op::read ? 0 : sizes.back() - 1; // (the last: a ping's tag)
        bool ok = o.op != Op::atomic || counter == o.per_size();
        for (std::uint32_t i = 0; ok && i < n; ++i)
            ok = buf.data()[i] == pattern(i);
        if (!ok || s.bad_imm || s.messages != data_msgs)
            throw Error("the data in our memory is not what the requester sent (" + std::to_string(s.messages) +
                            " messages of " + std::to_string(data_msgs) + ", counter " + std::to_string(counter) + ")",
                        "both sides must run with the same --op, --mode, --size/--all, --iters and --warmup");
        result("Verified: %s", o.op == Op::atomic ? "the counter holds one per fetch-and-add" : "every byte is as sent");
    }
    if (args.use_cm) {
        step(8, "disconnect from the requester (RDMA CM)");
        cm_disconnect(x.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_bench_responder",
                     .role = "responder",
                     .summary = "rdma_bench, responder side: export memory and answer the requester's measurement.",
                     .rdma_cm = true};
    add_bench_flags(spec);
    return run_bench(spec, argc, argv, run);
}
