/**
 * @file responder.cpp
 * @brief RDMA READ, responder side: export a string for the requester to read, then wait.
 *
 * The responder has no task of its own: it registers its buffer with remote read (and nothing more),
 * hands out address, length and rkey, and waits for the requester's goodbye before it releases the
 * memory. Its CPU never sees the READ.
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

    step(2, "register a %zu-byte buffer holding \"%s\" (local read/write + remote read)", max_message_length,
         args.message.c_str());
    Buffer buf(max_message_length);
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    //! [reg_mr]
    // DOCA's table: the responder's mmap is local read/write + remote read. No remote write: the
    // requester can read this buffer through the rkey but cannot change a byte of it.
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create a completion queue and an RC queue pair that accepts remote reads");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_READ); // the QP must grant remote read too
    Completions completions(cq.get());                 // our poll loop finds each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post a receive for the requester's goodbye");
    post_goodbye_receive(qp.get(), mr.get()); // an empty entry: the goodbye carries no data (chapter 2)

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our mmap descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the buffer");
    //! [rd_atomic]
    // Responder resources (max_dest_rd_atomic, set at RTR): how many READs the requester may have
    // outstanding at us at once. Our device keeps state for each one until its response data is sent;
    // the requester's max_rd_atomic (initiator depth) should not exceed it. Bounded by the device's
    // max_qp_rd_atom; at least 1, because with 0 our QP answers every incoming READ with a NAK.
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_rd_atom, 16));
    //! [rd_atomic]
    ResourceDescriptor exported = describe_export(mr.get(), access); // exactly the registered range (chapter 2)
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the requester (rdma_read_requester)",
                                          .rd_atomic = rd_atomic},
                                         &exported);

    step(6, "wait for the goodbye; the READ itself gives us no completion");
    completions.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s,
                     "the requester's goodbye (a zero-length SEND after its READ)");
    result("Responder memory still holds: \"%s\"", args.message.c_str());
    if (std::memcmp(buf.data(), args.message.data(), args.message.size()) != 0)
        throw Error("the exported buffer changed although it grants no remote write",
                    "this should never happen; check dmesg");

    step(7, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_read_responder",
                           .role = "responder",
                           .summary = "RDMA READ, responder side: export a string for the requester to read.",
                           .message_flag = 'r',
                           .message_help = "string the requester reads",
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
