/**
 * @file sender.cpp
 * @brief RDMA SEND, sender side: hand a string to the receiver, which decides where it lands.
 *
 * SEND/RECEIVE is the "two-sided" model: both CPUs take part. The sender says only WHAT to send; it
 * names no remote address and needs no rkey, so nothing is exported on either side. The receiver's
 * CPU chooses WHERE the bytes land, by posting a receive (a buffer) before the message arrives. If no
 * receive is waiting, or it is too small, the send fails, and this side's completion says so.
 * The QP transitions are written out in rdma_write/requester.cpp; here they are the rc_qp.hpp helpers.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <cstring>

using namespace rdma_samples;

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a buffer holding the %zu-byte string to send (local read/write, not exported)",
         args.message.size());
    Buffer buf(max_message_length);
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    //! [reg_mr]
    // DOCA's table: for send/receive, both sides' mmaps are local read/write only. The device reads
    // the message from here on our behalf (the lkey proves we registered it); the receiver never
    // addresses our memory, so there is no IBV_ACCESS_REMOTE_* flag and nothing to export.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]
    info("addr %p, length %zu, lkey 0x%x", buf.data(), buf.size(), mr->lkey);

    step(3, "create a completion queue and an RC queue pair");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), 16, nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    // The peer may do nothing to our memory through this QP: a SEND needs no remote permission.
    qp_to_init(qp.get(), dev, 0);
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "publish our connection descriptor and wait for the receiver's answer");
    const std::uint32_t psn = random_psn();
    const ConnectionDescriptor local = describe_qp(qp.get(), dev, psn, new_nonce());
    write_descriptor_file(args.local_descriptor_path, format_descriptor(local));
    info("wrote %s: QPN 0x%06x, PSN 0x%06x, GID %s", args.local_descriptor_path.c_str(), local.qp_num, local.psn,
         gid_to_string(local.gid).c_str());
    // The receiver answers only after its QP is at RTR and its receive is posted: our SEND finds a
    // buffer waiting. There is no mmap descriptor to wait for: a SEND names no remote address.
    const ConnectionDescriptor remote =
        wait_for_connection_descriptor({args.remote_descriptor_path, "the receiver (rdma_receive)", args.timeout_s, local.nonce});
    info("receiver: QPN 0x%06x, PSN 0x%06x, GID %s", remote.qp_num, remote.psn, gid_to_string(remote.gid).c_str());

    step(5, "move the QP INIT -> RTR -> RTS (see rdma_write/requester.cpp)");
    qp_to_rtr(qp.get(), dev, remote);
    qp_to_rts(qp.get(), psn);

    step(6, "post a SEND of %zu bytes; the receiver's posted receive decides where they land", args.message.size());
    result("Submitting RDMA send task that sends \"%s\" to receiver", args.message.c_str());
    //! [post_send]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // the bytes to send...
    sge.length = static_cast<std::uint32_t>(args.message.size());
    sge.lkey = mr->lkey;                                      // ...from memory we registered
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_SEND;      // no wr.wr.rdma.remote_addr, no rkey: the receiver picks the place
    wr.sg_list = &sge;
    wr.num_sge = args.message.empty() ? 0 : 1; // an empty message carries no data (it keeps a connection alive)
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_rc(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(SEND)");
    //! [post_send]

    step(7, "poll the completion queue until the receiver has acknowledged the SEND");
    ibv_wc wc{};
    Waiter waiter(args.timeout_s, "the SEND completion");
    while (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 0)
        waiter.pause();
    //! [send_errors]
    // A SEND fails here when the RECEIVER's side was not ready for it. Name what the receiver got wrong.
    std::string hint;
    if (wc.status == IBV_WC_RNR_RETRY_EXC_ERR)
        hint = "the receiver had no receive posted (Receiver Not Ready; we retried " + std::to_string(rc_rnr_retry) +
               " times). Failing to submit a receive task prior to the send task results in a fatal failure: "
               "the receiver must post its receive before it publishes its descriptor (drop --no-prepost-receive)";
    else if (wc.status == IBV_WC_REM_INV_REQ_ERR || wc.status == IBV_WC_REM_OP_ERR) // spec: INV_REQ; Soft-RoCE: OP
        hint = "the receive buffer the receiver posted is too small for our " + std::to_string(args.message.size()) +
               "-byte message; it must post a receive at least that large (its --recv-size), or send less with -s";
    try {
        check_wc(wc, IBV_WC_SEND, "the SEND");
    } catch (const Error &e) {
        throw Error(e.what(), hint.empty() ? e.hint() : hint);
    }
    //! [send_errors]
    result("RDMA send task was done successfully");
} // qp, cq, mr, pd and the device close here, in reverse order of creation

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_send",
                           .role = "sender",
                           .summary = "RDMA SEND, sender side: send a string into a receive the receiver has posted.",
                           .message_flag = 's',
                           .message_help = "string to send",
                           .resource_descriptor = false};
    return run_sample(spec, argc, argv, run);
}
