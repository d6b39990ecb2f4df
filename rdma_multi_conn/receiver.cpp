/**
 * @file receiver.cpp
 * @brief Many connections, receiver side: one RC QP per sender, one message on each, one shared CQ.
 *
 * RC is one QP per peer: talking to N peers means N QPs. They can share one protection domain, one
 * memory region and one completion queue; a completion says which QP it belongs to (wc.qp_num) and
 * carries the wr_id we chose when posting, here the buffer slot. Every receive is posted before its
 * sender can reach it, so no sender ever meets "receiver not ready". The receiver sleeps on a
 * completion channel instead of spinning. This file sets them up; the loop that takes the messages
 * is in receiving.hpp (the sleep) and server.hpp (the CM server). rdma_srq_receive, this receiver with
 * one shared receive queue for all the QPs, shares their bookkeeping (common/multi_receive.hpp).
 *
 * Two ways to connect (see rdma_write for the single-QP versions of both):
 *  - descriptor files (-nc N): one file per connection, "<path>-0000", "<path>-0001", ...;
 *  - RDMA CM (-cm): without -sa this process is the server and waits for -nc clients (each a separate
 *    rdma_multi_conn_send -cm -sa ADDR); with -sa it is one client of a sending server.
 */
#include "server.hpp"
#include "support/options.hpp"

#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

#include <chrono>
#include <thread>

using namespace rdma_samples;
using namespace rdma_multi_conn;

namespace {

/** Post buffer slot @p slot of @p buf as a receive on @p qp. */
void post_receive(ibv_qp *qp, const Buffer &buf, const ibv_mr *mr, std::uint64_t slot)
{
    //! [post_recv]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data() + slot * max_message_length);
    sge.length = static_cast<std::uint32_t>(max_message_length);
    sge.lkey = mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot; // comes back in the completion: which slot holds the message
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_recv(qp, &wr, &bad_wr), "ibv_post_recv(slot " + std::to_string(slot) + ")");
    //! [post_recv]
}

void run(const Args &args)
{
    const Flow flow = flow_of(args); // descriptor files, an RDMA CM client or server (support/options.hpp)
    const int n = connections(args, flow);

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register one buffer with a %zu-byte slot per connection (%d), local write only", max_message_length, n);
    Buffer buf(static_cast<std::size_t>(n) * max_message_length);
    // DOCA's table: the receiver's mmap is local read/write. The device writes each incoming message
    // into a slot, a local write on our behalf; SEND/RECEIVE is two-sided, so no remote access at all.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion channel, one completion queue for all connections and %d RC queue pair(s)", n);
    //! [qps]
    // One CQ is enough for every QP, if it has room for all they can have outstanding at once: the
    // rule is entries >= sends + receives that can be outstanding, summed over the QPs (2 + 2 each
    // here); every send counts, signaled or not, because a failed or flushed one completes too.
    // Its completion channel is where we sleep while nothing completes (step 6).
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 2};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), n * cq_entries(caps), nullptr, channel.get(), 0), "ibv_create_cq"));
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps));
        qp_to_init(qps.back().get(), dev, 0); // a receive-only QP grants the peer nothing remote
    }
    //! [qps]
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);
    // Every message is printed as its completion is taken (receiving.hpp): wr_id is its slot, qp_num its connection.
    const Receiver receiver{dev.ctx.get(), cq.get(), channel.get(), qps, buf};

    step(4, "post a receive on every QP before any sender can reach it");
    for (int i = 0; i < n; ++i)
        post_receive(qps[static_cast<std::size_t>(i)].get(), buf, mr.get(), static_cast<std::uint64_t>(i)); // slot i

    switch (flow) {
    case Flow::descriptor_files: {
        step(5, "for each connection: read the sender's descriptor, move to RTR/RTS, answer with ours");
        connect_by_files(args, dev, qps); // common/multi_receive.hpp
        step(6, "sleep on the completion channel until %d message(s) arrived", n);
        wait_for_messages(receiver, n, args.timeout_s, "the messages of " + std::to_string(n) + " connection(s)");
        step(7, "keep the QPs a moment: if an ACK of ours was lost, its sender resends the message");
        // Like TCP's TIME_WAIT (rc_qp.hpp, retransmit_window_ms()): a QP destroyed at once could not
        // acknowledge the resend, and the sender would fail although its message arrived.
        std::this_thread::sleep_for(std::chrono::milliseconds(retransmit_window_ms(qps[0].get())));
        break;
    }
    case Flow::cm_client: {
        step(5, "connect to the sending server with RDMA CM (%s port %u)", args.server_addr->c_str(), args.listen_port);
        CmConnection cm = cm_connect(args.cm_server(), args.timeout_s, dev, qps[0].get());
        step(6, "sleep on the completion channel until the server's message arrived");
        wait_for_messages(receiver, 1, args.timeout_s, "the server's message");
        step(7, "disconnect (RDMA CM)");
        cm_disconnect(cm, args.timeout_s);
        break;
    }
    case Flow::cm_server:
        step(5, "serve %d senders with RDMA CM on port %u: accept each, print its message as it arrives", n,
             args.listen_port);
        serve(args, dev, receiver);
        break;
    }
} // the QPs (all of them), cq, channel, mr, pd and the device close here

} // namespace

int main(int argc, char **argv)
{
    return run_sample(receiver_spec(), argc, argv, run);
}
