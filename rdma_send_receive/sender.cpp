/**
 * @file sender.cpp
 * @brief SEND, sender side: hand a message to the receiver, who decided in advance where it lands.
 *
 * SEND/RECEIVE is the "two-sided" model: the receiver's CPU takes part. It posts a receive naming its
 * own buffer, and the sender's message fills the first receive waiting in the queue. No address and no
 * rkey cross the wire, so neither side exports memory. The QP's RTR and RTS transitions are written
 * out in rdma_write/requester.cpp; connect_to_responder() does them here, after the exchange.
 */
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
#include <cstring>

using namespace rdma_samples;

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a buffer holding the %zu-byte message (local read/write, not exported)", args.message.size());
    Buffer buf(std::max<std::size_t>(args.message.size(), 1)); // what we send and no more (a region is never empty)
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    //! [reg_mr]
    // The device only reads the message from here: verbs needs no flag for a SEND's source (0 would
    // do); LOCAL_WRITE is DOCA's choice, its table gives both sides of a send/receive local
    // read/write. Nobody reaches this memory remotely, so no IBV_ACCESS_REMOTE_* flag.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // we only send: the receiver may do nothing to our memory
    Completions completions(cq.get()); // our poll loop finds its completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the receiver with RDMA CM; the CM moves the QP to RTR and RTS"
                        : "publish our connection descriptor, wait for the receiver's answer, move the QP to RTS");
    // The receiver answers (or accepts) only after it has posted its receive: our SEND cannot arrive
    // too early. No READs or atomics (0), and no descriptor to learn: a SEND names no remote memory.
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the receiver (rdma_receive)"});

    step(5, "post a SEND of %zu bytes", args.message.size());
    result("Submitting RDMA send task that sends \"%s\" to receiver", args.message.c_str());
    //! [post_send]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    sge.length = static_cast<std::uint32_t>(args.message.size());
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_SEND; // no remote address, no rkey: the receiver chose the buffer
    wr.sg_list = &sge;
    wr.num_sge = args.message.empty() ? 0 : 1; // an empty message is legal: it consumes one receive
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(SEND)");
    //! [post_send]

    step(6, "poll the completion queue until the SEND completes");
    // Success means the receiver's device acknowledged the message into a posted receive.
    completions.wait(1, IBV_WC_SEND, args.timeout_s, "the SEND completion");
    result("Sender has sent: \"%s\"", args.message.c_str());

    // No goodbye: this SEND was the last message. The receiver keeps its QP a moment after it, so that
    // if its ACK was lost, our device's resent SEND is still acknowledged (receiver.cpp, step 7).
    if (args.use_cm) {
        step(7, "disconnect: RDMA CM tells the receiver we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_send",
                           .role = "sender",
                           .summary = "SEND, sender side: send a message into a receive the receiver posted.",
                           .message_flag = 's',
                           .message_help = "string to send",
                           .resource_descriptor = false,
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
