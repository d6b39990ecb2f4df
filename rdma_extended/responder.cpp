/**
 * @file responder.cpp
 * @brief The extended verbs API, responder side: exports memory for WRITE, READ and the atomics,
 * receives a WRITE with immediate, a SEND and a goodbye, and reads their completions through an
 * extended CQ.
 *
 * A responder posts nothing for the one-sided operations (chapters 2, 3 and 7): its device does the
 * work. What the extended API changes on this side is the CQ: it is created with the fields its
 * completions must report (byte count, immediate value), and each field is read by an accessor.
 * Receives are posted the classic way: the extended API has no receive calls (ibv_post_recv() it is).
 */
#include "extended.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>

#include <algorithm>
#include <cstring>
#include <string>

using namespace rdma_samples;
using namespace rdma_extended;

/** The text of a slot the requester wrote into, up to its first NUL (the memory was zeroed). */
static std::string text_of(const char *slot, std::size_t size)
{
    return std::string(slot, strnlen(slot, size));
}

static void run(const Args &args)
{
    step(1, "open an RDMA device, check it has immediate data and atomics, allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // (none on iWARP)
    require_atomics(dev);        // our device executes the requester's atomics
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register %zu bytes for remote write, read and atomic, and %u for the SEND's receive", sizeof(Exported),
         send_room);
    Buffer exported_buf(sizeof(Exported)); // zeroed: the counter starts at 0
    auto *exported = reinterpret_cast<Exported *>(exported_buf.data());
    // Every access the requester's operations need, and no more: WRITE, READ, the atomics (remote write
    // and atomic need local write too).
    const int access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    MrPtr mr(check(ibv_reg_mr(pd.get(), exported_buf.data(), exported_buf.size(), access), "ibv_reg_mr"));
    ResourceDescriptor exported_desc = describe_export(mr.get(), access, ResourceKind::mmap, sizeof(Exported));
    Buffer inbox(send_room); // the SEND's bytes land here: local write only, never exported
    MrPtr inbox_mr(check(ibv_reg_mr(pd.get(), inbox.data(), inbox.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create an extended CQ for our receives (byte count and immediate), and an RC QP");
    //! [recv_cq_ex]
    // Our receives complete with a byte count (the SEND) and an immediate value (the WRITE with
    // immediate): the CQ is created to report exactly those two.
    ibv_cq_init_attr_ex cq_attr{};
    cq_attr.cqe = cq_entries(QpCaps{});
    cq_attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM;
    CqExPtr recv_cq(check(ibv_create_cq_ex(dev.ctx.get(), &cq_attr), "ibv_create_cq_ex"));
    //! [recv_cq_ex]
    // Our only SEND is the descriptor with -cm, through the common exchange, which polls the classic way.
    CqPtr send_cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    ibv_qp_init_attr qp_attr{};
    qp_attr.qp_type = IBV_QPT_RC;
    qp_attr.send_cq = send_cq.get();
    qp_attr.recv_cq = ibv_cq_ex_to_cq(recv_cq.get());
    qp_attr.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
    QpPtr qp(check(ibv_create_qp(pd.get(), &qp_attr), "ibv_create_qp"));
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    Completions descriptor(send_cq.get()); // (-cm: where our descriptor's SEND completes)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post three receives, in the order their messages come: WRITE with immediate, SEND, goodbye");
    // Receives are consumed in the order they were posted, and the requester's messages arrive in the
    // order it posted them: the first receive takes the immediate (no data lands in it), the second the
    // SEND's bytes, the third the goodbye.
    post_empty_receive(qp.get(), inbox_mr.get(), 1, "ibv_post_recv(WRITE with immediate)");
    ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(inbox.data()), .length = send_room, .lkey = inbox_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv(SEND)");
    post_goodbye_receive(qp.get(), inbox_mr.get());

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our memory's descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export our memory");
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = descriptor,
                                          .peer = "the requester (rdma_extended_requester)",
                                          .rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_rd_atom)},
                                         &exported_desc);

    step(6, "poll the extended CQ: the WRITE with immediate, the SEND, the goodbye");
    //! [poll_recv]
    const Done imm = next_done(recv_cq.get(), cq_attr.wc_flags, args.timeout_s,
                               "the requester's RDMA WRITE with immediate", dev.ctx.get());
    check_done(imm, IBV_WC_RECV_RDMA_WITH_IMM, "the receive of the WRITE with immediate");
    if (!imm.with_imm || imm.imm != immediate)
        throw Error("the WRITE with immediate carries no immediate 0xabcd", "is the peer rdma_extended_requester?");
    result("WRITE with immediate 0x%x: %u bytes, %s", imm.imm, imm.byte_len,
           quote(text_of(exported->written_imm, sizeof exported->written_imm)).c_str());
    const Done sent = next_done(recv_cq.get(), cq_attr.wc_flags, args.timeout_s, "the requester's SEND", dev.ctx.get());
    check_done(sent, IBV_WC_RECV, "the receive of the SEND");
    result("SEND: %u bytes, %s", sent.byte_len,
           quote(std::string(inbox.data(), std::min(sent.byte_len, send_room))).c_str());
    const Done goodbye =
        next_done(recv_cq.get(), cq_attr.wc_flags, args.timeout_s, "the requester's goodbye", dev.ctx.get());
    check_done(goodbye, IBV_WC_RECV, "the receive of the goodbye");
    //! [poll_recv]
    // The goodbye came after the requester's last atomic: what our memory holds now is final.
    result("WRITE: %s", quote(text_of(exported->written, sizeof exported->written)).c_str());
    result("Counter after the requester's atomics: %llu", static_cast<unsigned long long>(exported->counter));

    step(7, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_extended_responder",
                     .role = "responder",
                     .summary =
                         "The extended verbs API, responder side: export memory, read completions field by field.",
                     .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
