/**
 * @file receiver.cpp
 * @brief RDMA RECEIVE with immediate, receiver side: take a message and its 32-bit immediate.
 *
 * Everything in rdma_send_receive/receiver.cpp holds (read it first): two-sided, nothing exported,
 * the receive is posted before the connection step (accept_requester(), as in every pair), byte_len
 * says how many bytes arrived. New here: the sender's immediate value arrives in the work completion,
 * not in the buffer. The completion says so with IBV_WC_WITH_IMM in wc.wc_flags, and wc.imm_data
 * holds the value in network byte order.
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

#include <arpa/inet.h> // ntohl

#include <cstdio>

using namespace rdma_samples;

/** This program's own flags; the common ones are in Args. */
struct Options {
    /// --recv-size: smaller than the message shows a length error (IBV_WC_LOC_LEN_ERR on mlx5, IBV_WC_LOC_QP_OP_ERR on Soft-RoCE)
    std::size_t recv_size = max_message_length;
    bool prepost = true; ///< --no-prepost-receive: the demonstration below
};

using doca::immediate; // 0xABCD, DOCA's immediate value, which the sender puts in every SEND with immediate

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // none on siw (nor in RDMAP): refused here, at once, not by a failed post
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte receive buffer (local read/write, not exported)", opt.recv_size);
    Buffer buf(opt.recv_size);
    //! [reg_mr]
    // DOCA's table: for send/receive, both sides' mmaps are local read/write only. Local write is
    // required: the device writes the incoming message into this buffer for us. No remote flag and no
    // export: the sender never names an address here, our posted receive does.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]
    info("addr %p, length %zu, lkey 0x%x", buf.data(), buf.size(), mr->lkey);

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // receiving a SEND needs no remote permission: no address of ours is named
    Completions completions(cq.get()); // our poll loop finds its completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    if (opt.prepost) {
        step(4, "post a receive for the sender's message, before anyone can send it");
        //! [post_recv]
        // A receive looks the same whether or not the SEND brings an immediate: only the completion tells
        // the difference.
        ibv_sge sge{};
        sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // where the message will land...
        sge.length = static_cast<std::uint32_t>(buf.size());     // ...and the most it may hold
        sge.lkey = mr->lkey;
        ibv_recv_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_post(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv");
        //! [post_recv]
        info("posted a receive of %zu bytes at %p", buf.size(), buf.data());
    } else {
        // --no-prepost-receive: even an empty SEND with immediate needs a receive (the immediate has to
        // land in a completion), so the sender's SEND is refused (Receiver Not Ready) until its RNR
        // retries run out; nothing ever completes here, and our wait in step 6 runs out.
        step(4, "(demonstration) post NO receive: the sender's SEND will find nothing to fill");
    }

    step(5, args.use_cm ? "wait for the sender to connect with RDMA CM; the CM moves the QP to RTR and RTS"
                        : "wait for the sender's descriptor, move the QP to RTR and RTS, answer it");
    // As in chapter 5: our receive is posted, so the sender may send from here on; nothing to export.
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the sender (rdma_send_immediate)"});

    step(6, "poll the completion queue until the message has landed in our receive");
    const std::string what =
        opt.prepost ? "the sender's message" : "the sender's message, with no receive posted (--no-prepost-receive)";
    const std::string hint = opt.prepost ? "" // (the general one)
                                         : "nothing can arrive without a posted receive: the sender's SEND was refused "
                                           "(Receiver Not Ready). Failing to submit a receive task prior to the send "
                                           "task results in a fatal failure; run without --no-prepost-receive";
    //! [poll_recv]
    const ibv_wc wc = completions.poll_for(1, args.timeout_s, what, hint);
    // A message longer than the posted receive: mlx5 says IBV_WC_LOC_LEN_ERR; Soft-RoCE (rxe) and
    // qib report the same event as IBV_WC_LOC_QP_OP_ERR. Our receive is well formed, so
    // either status here means the message did not fit. The sender's SEND fails as well.
    if (wc.status == IBV_WC_LOC_LEN_ERR || wc.status == IBV_WC_LOC_QP_OP_ERR)
        throw Error(std::string("the receive completed with ") + wc_status_name(wc.status) + ": " +
                        ibv_wc_status_str(wc.status),
                    "the message was longer than the " + std::to_string(buf.size()) +
                        "-byte receive buffer we posted (--recv-size); post a receive as large as the largest "
                        "message (-s takes up to 256 bytes)");
    completions.check(wc, IBV_WC_RECV, "the receive"); // a SEND with immediate completes as IBV_WC_RECV, too
    //! [poll_recv]
    if (!opt.prepost)
        throw Error("a message arrived although no receive was posted", "this should never happen; check dmesg");
    info("completion: IBV_WC_RECV, byte_len %u, IBV_WC_WITH_IMM %s", wc.byte_len,
         (wc.wc_flags & IBV_WC_WITH_IMM) ? "set" : "not set");

    step(7, "check the immediate in the completion, then print the byte_len bytes that arrived");
    //! [check_imm]
    // imm_data is valid only when IBV_WC_WITH_IMM is set; a plain SEND (rdma_send) leaves it unset.
    if (!(wc.wc_flags & IBV_WC_WITH_IMM))
        throw Error("the message arrived without an immediate (IBV_WC_WITH_IMM not set in wc_flags)",
                    "the sender posted a plain SEND; start rdma_send_immediate, not rdma_send");
    const std::uint32_t imm = ntohl(wc.imm_data); // network byte order on the wire and in the completion
    //! [check_imm]
    if (imm != immediate) {
        char text[96];
        std::snprintf(text, sizeof text, "the immediate is 0x%x, expected 0x%x", imm, immediate);
        throw Error(text, "the sender must post imm_data = htonl(0xABCD); a value swapped byte for byte means "
                          "a missing htonl or ntohl");
    }
    if (wc.byte_len > buf.size())
        throw Error("byte_len " + std::to_string(wc.byte_len) + " exceeds the receive buffer",
                    "a device bug; check dmesg");
    result("Got from sender: \"%.*s\" with immediate: 0x%x", static_cast<int>(wc.byte_len), buf.data(), imm);

    step(8, args.use_cm ? "disconnect from the sender (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the message was lost, the sender resends it");
    close_as_responder(exchange, args.timeout_s);
} // qp, cq, mr, pd and the device close here, in reverse order of creation

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_receive_immediate",
                     .role = "receiver",
                     .summary = "RDMA RECEIVE with immediate, receiver side: post a receive buffer, print the message "
                                "and the immediate value the sender sends.",
                     .resource_descriptor = false,
                     .rdma_cm = true};
    spec.extra.push_back(
        {"recv-size", "BYTES",
         "bytes of the posted receive buffer; smaller than the message shows a length error (IBV_WC_LOC_LEN_ERR on mlx5, IBV_WC_LOC_QP_OP_ERR on Soft-RoCE)",
         std::to_string(max_message_length),
         [&](const std::string &v) { opt.recv_size = parse_number("--recv-size", v, 1, max_message_length); }});
    spec.extra.push_back({"no-prepost-receive", "",
                          "demonstration: post no receive, so the sender's SEND fails (Receiver Not Ready)", "",
                          [&](const std::string &) { opt.prepost = false; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
