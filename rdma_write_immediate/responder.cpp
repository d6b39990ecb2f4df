/**
 * @file responder.cpp
 * @brief RDMA WRITE with immediate, responder side: a posted receive turns the WRITE into a completion.
 *
 * A plain RDMA WRITE is invisible to the responder (rdma_write needed a goodbye SEND after it). With an
 * immediate, the WRITE's last packet consumes one posted receive: the bytes still land in the exported
 * buffer, and the receive completes with opcode IBV_WC_RECV_RDMA_WITH_IMM, the immediate value and the
 * number of bytes written. No receive posted means the requester gets "Receiver Not Ready".
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

#include <arpa/inet.h>

#include <cstring>

using namespace rdma_samples;

using doca::immediate; // 0xABCD, what DOCA's requester sends as the immediate

/** This program's own flags; the common ones are in Args. */
struct Options {
    bool prepost = true; ///< --no-prepost-receive: the demonstration below instead of the receive
};

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // none on siw (nor in RDMAP): refused here, at once, not by a failed post
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte buffer the requester may write into (local read/write + remote write)",
         max_message_length);
    Buffer buf(max_message_length);
    // DOCA's table, as rdma_write: local read/write + remote write on the mmap and the QP.
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    // what step 5 exports: exactly the registered range
    ResourceDescriptor exported = describe_export(mr.get(), access);

    step(3, "create a completion queue and an RC queue pair that accepts remote writes, and move it to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE); // the QP must grant remote write too
    Completions completions(cq.get());                  // our poll loop finds each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    if (opt.prepost) {
        step(4, "post a receive for the immediate BEFORE we publish anything");
        //! [post_recv]
        // The WRITE with immediate consumes one receive from our queue. Posted before our descriptors
        // are published, it is surely there when the WRITE arrives; without it our device answers
        // "Receiver Not Ready" and the requester retries (rnr_retry) and then fails.
        ibv_recv_wr wr{};
        wr.wr_id = 1;
        wr.num_sge = 0; // no buffer: the data goes to the rkey's memory, only the immediate comes here
        ibv_recv_wr *bad_wr = nullptr;
        check_post(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv");
        //! [post_recv]
    } else {
        // --no-prepost-receive: the WRITE with immediate finds nothing to consume, our device answers
        // "Receiver Not Ready", and the requester, after rnr_retry retries, fails with
        // IBV_WC_RNR_RETRY_EXC_ERR. Our wait in step 6 is for a completion that cannot come, until -t.
        step(4, "(demonstration) post NO receive: the WRITE with immediate will find nothing to consume");
    }

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our mmap descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the buffer");
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the requester (rdma_write_immediate_requester)"},
                                         &exported);

    step(6, "poll the completion queue: the immediate says the write has landed");
    const std::string what = opt.prepost ? "the requester's RDMA WRITE with immediate"
                                         : "the requester's RDMA WRITE with immediate, which cannot complete here: "
                                           "--no-prepost-receive posted no receive for it to consume";
    //! [poll_imm]
    // This completion is our only notification: unlike rdma_write, no goodbye SEND follows. With -cm it
    // may come before our descriptor SEND's own completion (chapter 2): that wait kept it for us.
    const ibv_wc wc = completions.wait(1, IBV_WC_RECV_RDMA_WITH_IMM, args.timeout_s, what);
    if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != immediate)
        throw Error("the completion carries no immediate 0xabcd", "is the peer rdma_write_immediate_requester?");
    //! [poll_imm]
    if (!opt.prepost)
        throw Error("a receive completed although none was posted", "this should never happen; check dmesg");
    // byte_len is the number of bytes the WRITE put into our buffer (the exported range was zeroed, and
    // a -w string holds no NUL byte, so the two must agree).
    const std::size_t in_buffer = strnlen(buf.data(), buf.size());
    if (wc.byte_len != in_buffer)
        throw Error("the completion says " + std::to_string(wc.byte_len) +
                        " bytes were written, but the buffer holds " + std::to_string(in_buffer),
                    "is the peer rdma_write_immediate_requester?");
    result("Responder memory now holds: \"%.*s\" (%u bytes, immediate 0x%x)", static_cast<int>(wc.byte_len), buf.data(),
           wc.byte_len, ntohl(wc.imm_data));

    step(7, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the WRITE was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_write_immediate_responder",
                     .role = "responder",
                     .summary =
                         "RDMA WRITE with immediate, responder side: export a buffer, get a completion for the write.",
                     .rdma_cm = true};
    spec.extra.push_back({"no-prepost-receive", "",
                          "demonstration: post no receive, so the requester fails with RNR retry exceeded", "",
                          [&](const std::string &) { opt.prepost = false; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
