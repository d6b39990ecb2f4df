/**
 * @file receiver.cpp
 * @brief RECEIVE, receiver side: post a receive, then let the sender fill it.
 *
 * A SEND consumes the first receive posted on the receiving QP. If none is posted when it arrives, the
 * receiver's device answers "Receiver Not Ready" and the sender retries, then fails. So the receive is
 * posted first, before this side publishes anything the sender could act on.
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

using namespace rdma_samples;

/** This program's own flags; the common ones are in Args. */
struct Options {
    /// --recv-size: smaller than the message shows a length error (IBV_WC_LOC_LEN_ERR on mlx5, IBV_WC_LOC_QP_OP_ERR on Soft-RoCE)
    std::size_t recv_size = max_message_length;
    bool prepost = true; ///< --no-prepost-receive: the demonstration below
};

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte receive buffer (local read/write: the device writes into it)", opt.recv_size);
    Buffer buf(opt.recv_size);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair (no remote access: SEND needs none)");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // a SEND touches no memory of ours by address: no remote access
    Completions completions(cq.get()); // our poll loop finds its completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    if (opt.prepost) {
        step(4, "post a receive for up to %zu bytes BEFORE the sender can send", opt.recv_size);
        //! [post_recv]
        ibv_sge sge{};
        sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
        sge.length = static_cast<std::uint32_t>(buf.size()); // a longer message fails (LOC_LEN_ERR or LOC_QP_OP_ERR)
        sge.lkey = mr->lkey;
        ibv_recv_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_post(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv");
        //! [post_recv]
    } else {
        // --no-prepost-receive: the sender's SEND finds nothing to fill. Our device answers each try with
        // an RNR NAK (Receiver Not Ready); after rnr_retry tries the sender fails with
        // IBV_WC_RNR_RETRY_EXC_ERR. Nothing ever completes here, so our wait in step 6 runs out.
        step(4, "(demonstration) post NO receive: the sender's SEND will find nothing to fill");
    }

    step(5, args.use_cm ? "wait for the sender to connect with RDMA CM; the CM moves the QP to RTR and RTS"
                        : "wait for the sender's descriptor, move the QP to RTR and RTS, answer it");
    // Every receive we need is posted: from here on the sender may send. Nothing to export (nullptr).
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the sender (rdma_send)"});

    step(6, "poll the completion queue until the message has arrived");
    const ibv_wc wc = completions.wait(1, IBV_WC_RECV, args.timeout_s, "the message from the sender");
    if (!opt.prepost)
        throw Error("a message arrived although no receive was posted", "this should never happen; check dmesg");
    // byte_len is how many bytes the SEND carried: the buffer holds exactly those.
    result("Got from sender: \"%.*s\"", static_cast<int>(wc.byte_len), buf.data());

    step(7, args.use_cm ? "disconnect from the sender (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the message was lost, the sender resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_receive",
                     .role = "receiver",
                     .summary = "RECEIVE, receiver side: post a receive and print what the sender sends into it.",
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
