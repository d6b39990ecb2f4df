/**
 * @file receiver.cpp
 * @brief A shared receive queue: N RC QPs that take their receives from one pool, refilled as messages
 * arrive, with the SRQ limit event armed.
 *
 * rdma_multi_conn_receive posts a receive on every QP: N connections need N x depth receive buffers,
 * idle on every quiet connection. Here the QPs have no receive queue of their own: they all take from one
 * shared receive queue (SRQ), a pool of --srq-size buffers. Each message is printed and its slot (wc.wr_id)
 * posted again; the device raises IBV_EVENT_SRQ_LIMIT_REACHED when the pool runs low (pool.hpp). The
 * receiving loop (receiving.hpp) sleeps on the completion channel and the device's async fd. The rest is
 * rdma_multi_conn's: its senders (rdma_multi_conn_send, unchanged: an SRQ is the receiver's business
 * alone), its two ways to connect (-nc N descriptor files, or -cm as the server of -nc senders), whose
 * bookkeeping both receivers share (common/multi_receive.hpp).
 */
#include "support/options.hpp"
#include "pool.hpp"
#include "receiving.hpp"

#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/test_control.hpp>

#include <chrono>
#include <thread>

namespace rdma_srq {
namespace {

void run(const Args &args, const ReceiverOptions &opt)
{
    const int n = args.num_connections;
    const std::uint32_t size = opt.size ? opt.size : static_cast<std::uint32_t>(n);
    check_options(args, opt, size);

    step(1, "open an RDMA device, allocate a protection domain, read its SRQ limits");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());
    ibv_device_attr attr{};
    check_rc(ibv_query_device(dev.ctx.get(), &attr), "ibv_query_device");
    attr.max_srq = test_control_int(TestHook::max_srq, attr.max_srq); // (the tests play a device without SRQs)
    if (attr.max_srq == 0)
        throw Error("device " + dev.name + " has no shared receive queues (max_srq 0)",
                    "use rdma_multi_conn_receive: each QP then posts its own receives");
    if (size > static_cast<std::uint32_t>(attr.max_srq_wr))
        throw UsageError("--srq-size " + std::to_string(size) + ": device " + dev.name + " allows at most " +
                             std::to_string(attr.max_srq_wr) + " receives in an SRQ (max_srq_wr)",
                         "pass --srq-size " + std::to_string(attr.max_srq_wr) + " or less");
    info("device limits: max_srq %d, max_srq_wr %d", attr.max_srq, attr.max_srq_wr);

    step(2, "register one buffer with a %zu-byte slot per SRQ receive (%u), local write only", max_message_length,
         size);
    //! [memory]
    // Without an SRQ every QP needs its own receives: N connections x depth x size, posted per QP and
    // idle on every quiet connection. With one SRQ the pool is sized for what arrives at once.
    info("receive memory without an SRQ: %d connection(s) x 1 receive x %zu bytes = %zu bytes", n, max_message_length,
         static_cast<std::size_t>(n) * max_message_length);
    info("receive memory with one SRQ:   %u receives x %zu bytes = %zu bytes, shared by all %d", size,
         max_message_length, static_cast<std::size_t>(size) * max_message_length, n);
    //! [memory]
    Buffer buf(static_cast<std::size_t>(size) * max_message_length);
    // DOCA's table: local read/write. The device writes each message into a slot, a local write on our
    // behalf; SEND/RECEIVE is two-sided, so no remote access at all.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion channel, one completion queue, one shared receive queue and %d RC queue pair(s)", n);
    //! [qps]
    // The CQ takes every QP's sends (2 each: see cq_entries) and every receive the SRQ can hand out.
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 0};
    const int cq_size = n * cq_entries(caps) + static_cast<int>(size);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_size, nullptr, channel.get(), 0), "ibv_create_cq"));
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = size; // the pool: receives waiting for any of the QPs
    srq_attr.attr.max_sge = 1;
    SrqPtr srq(check(ibv_create_srq(pd.get(), &srq_attr), "ibv_create_srq(max_wr " + std::to_string(size) + ")"));
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps, srq.get())); // no receive queue of its own
        qp_to_init(qps.back().get(), dev, 0);                             // receive-only: nothing remote
    }
    //! [qps]
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);
    const Pool pool{srq.get(), buf, mr.get(), opt.limit ? opt.limit : (size + 1) / 2};
    // The receiving loop (receiving.hpp) takes the messages; each slot goes back to the pool as its message
    // is taken, and the device's async fd is watched for the limit event.
    const Receiver receiver{dev.ctx.get(), cq.get(), channel.get(), qps, pool};

    if (opt.hold_ms == 0) {
        step(4, "post %u receives into the SRQ, arm its limit at %u", size, pool.limit);
        fill_pool(pool, size);
    } else {
        step(4, "demonstration: leave the SRQ empty for %d ms after the senders connect", opt.hold_ms);
    }

    if (args.use_cm) {
        step(5, "serve %d senders with RDMA CM on port %u: accept each, print its message as it arrives", n,
             args.listen_port);
        serve(args, dev, receiver);
        return;
    }
    step(5, "for each connection: read the sender's descriptor, move to RTR/RTS, answer with ours");
    connect_by_files(args, dev, qps); // common/multi_receive.hpp
    if (opt.hold_ms > 0) {            // every SEND that comes now finds the SRQ empty: RNR NAK
        std::this_thread::sleep_for(std::chrono::milliseconds(opt.hold_ms));
        info("posting %u receives into the SRQ only now", size);
        fill_pool(pool, size);
    }
    step(6, "sleep on the completion channel until %d message(s) arrived", n);
    wait_for_messages(receiver, n, args.timeout_s, "the messages of " + std::to_string(n) + " connection(s)");
    step(7, "keep the QPs a moment: if an ACK of ours was lost, its sender resends the message");
    std::this_thread::sleep_for(std::chrono::milliseconds(retransmit_window_ms(qps[0].get()))); // (rdma_multi_conn)
} // the QPs (all of them), the SRQ, cq, channel, mr, pd and the device close here

} // namespace
} // namespace rdma_srq

int main(int argc, char **argv)
{
    rdma_srq::ReceiverOptions opt;
    const rdma_samples::ProgramSpec spec = rdma_srq::receiver_spec(opt);
    return rdma_samples::run_sample(spec, argc, argv,
                                    [&](const rdma_samples::Args &args) { rdma_srq::run(args, opt); });
}
