/**
 * @file sender.cpp
 * @brief RDMA SEND with immediate, sender side: a string plus a 32-bit value for the receiver's completion.
 *
 * Everything in rdma_send_receive/sender.cpp holds (read it first): a two-sided SEND, no rkey, nothing
 * exported, the receiver's posted receive decides where the bytes land, and the same connection step
 * (connect_to_responder(); both flows are written out in rdma_write/requester.cpp). The one new thing
 * is the immediate: 32 bits that travel in the packet header, not in the payload, and come out in the
 * receiver's work completion (wc.imm_data) instead of in its buffer. A receiver can learn "which
 * message is this" without reading the data. This sample sends DOCA's value, 0xABCD.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/doca.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <arpa/inet.h> // htonl

#include <algorithm>
#include <cstring>

using namespace rdma_samples;

using doca::immediate; // 0xABCD, DOCA's immediate value

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // none on siw (nor in RDMAP): refused here, at once, not by a failed post
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a buffer holding the %zu-byte string to send (local read/write, not exported)",
         args.message.size());
    Buffer buf(std::max<std::size_t>(args.message.size(), 1)); // what we send and no more (a region is never empty)
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    // The device reads the message from here on our behalf (the lkey proves we registered it): a
    // source needs no flag; LOCAL_WRITE is DOCA's choice (its table gives both sides local
    // read/write), not a verbs need. The receiver never addresses our memory: no IBV_ACCESS_REMOTE_*.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    info("addr %p, length %zu, lkey 0x%x", buf.data(), buf.size(), mr->lkey);

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // a SEND needs no remote permission: the receiver may do nothing to our memory
    Completions completions(cq.get()); // our poll loop finds its completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the receiver with RDMA CM; the CM moves the QP to RTR and RTS"
                        : "publish our connection descriptor, wait for the receiver's answer, move the QP to RTS");
    // As in chapter 5: the receiver answers only once its receive is posted, and exports nothing.
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the receiver (rdma_receive_immediate)"});

    step(5, "post a SEND with immediate 0x%x and %zu bytes of data", immediate, args.message.size());
    result("Submitting RDMA send with immediate task that sends \"%s\" with immediate 0x%x to receiver",
           args.message.c_str(), immediate);
    info("imm_data = htonl(0x%x): the 32 bits travel in network byte order (big-endian)", immediate);
    //! [post_send_imm]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // the bytes to send...
    sge.length = static_cast<std::uint32_t>(args.message.size());
    sge.lkey = mr->lkey; // ...from memory we registered
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_SEND_WITH_IMM; // a SEND that also fills the receiver's wc.imm_data
    wr.imm_data = htonl(immediate);   // verbs carries imm_data in network byte order: convert it here
    wr.sg_list = &sge;
    wr.num_sge = args.message.empty() ? 0 : 1; // an empty message carries no data (it keeps a connection alive)
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(SEND_WITH_IMM)");
    //! [post_send_imm]

    step(6, "poll the completion queue until the receiver has acknowledged the SEND");
    const ibv_wc wc = completions.poll_for(1, args.timeout_s, "the SEND with immediate completion");
    //! [send_errors]
    // As for a plain SEND: a failure here means the RECEIVER was not ready for it. A SEND with immediate
    // consumes a posted receive too, even with no data (the immediate has to land in a completion).
    std::string hint;
    if (wc.status == IBV_WC_RNR_RETRY_EXC_ERR)
        hint = "the receiver had no receive posted (Receiver Not Ready; we retried " + std::to_string(rc_rnr_retry) +
               " times). Failing to submit a receive task prior to the send task results in a fatal failure: "
               "the receiver must post its receive before it publishes its descriptor (drop --no-prepost-receive)";
    else if (wc.status == IBV_WC_REM_INV_REQ_ERR || wc.status == IBV_WC_REM_OP_ERR) // IBTA: INV_REQ; rxe: OP
        hint = "the receive buffer the receiver posted is too small for our " + std::to_string(args.message.size()) +
               "-byte message; it must post a receive at least that large (its --recv-size), or send less with -s";
    try {
        completions.check(wc, IBV_WC_SEND, "the SEND with immediate"); // the sender's opcode is plain IBV_WC_SEND
    } catch (const Error &e) {
        throw Error(e.what(), hint.empty() ? e.hint() : hint);
    }
    //! [send_errors]
    result("RDMA send with immediate task was done successfully");

    // No goodbye, as in chapter 5: this SEND was the last message, and the receiver waits a moment
    // before it destroys its QP, in case its ACK was lost and our device sends it again.
    if (args.use_cm) {
        step(7, "disconnect: RDMA CM tells the receiver we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
} // qp, cq, mr, pd and the device close here, in reverse order of creation

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_send_immediate",
                           .role = "sender",
                           .summary = "RDMA SEND with immediate, sender side: send a string and the immediate 0xABCD "
                                      "into a receive the receiver has posted.",
                           .message_flag = 's',
                           .message_help = "string to send",
                           .resource_descriptor = false,
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
