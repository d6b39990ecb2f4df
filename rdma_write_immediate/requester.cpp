/**
 * @file requester.cpp
 * @brief RDMA WRITE with immediate, requester side: write a string and notify the responder at once.
 *
 * Like rdma_write, the bytes go straight into the responder's exported memory. The difference is the
 * 32-bit immediate value that travels with the last packet: it consumes a receive the responder posted
 * and gives the responder a completion. So the responder learns that the write has landed without a
 * separate goodbye message.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/doca.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <arpa/inet.h>

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

    step(2, "register a buffer holding the %zu-byte string to write (local read/write, not exported)",
         args.message.size());
    Buffer buf(std::max<std::size_t>(args.message.size(), 1)); // what we send and no more (a region is never empty)
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    // A source is only read by the device: LOCAL_WRITE is DOCA's choice, not a verbs need (chapter 2).
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get()); // our poll loop finds each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its mmap descriptor"
                        : "exchange descriptors with the responder and move the QP to RTS");
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the responder (rdma_write_immediate_responder)"},
                                             ResourceKind::mmap);
    const ResourceDescriptor &remote = exchange.resource;
    info("responder exports addr 0x%llx, length %u, rkey 0x%x, access %s", static_cast<unsigned long long>(remote.addr),
         remote.length, remote.rkey, access_to_string(remote.access).c_str());
    if (args.message.size() > remote.length)
        throw Error("the string is " + std::to_string(args.message.size()) + " bytes but the responder exported only " +
                        std::to_string(remote.length),
                    "write a shorter string with -w");
    if (!(remote.access & IBV_ACCESS_REMOTE_WRITE))
        throw Error("the responder's memory does not grant remote write (access " + access_to_string(remote.access) +
                        ")",
                    "the responder must register its buffer with IBV_ACCESS_REMOTE_WRITE");

    step(5, "post an RDMA WRITE with immediate 0x%x of %zu bytes to remote addr 0x%llx, rkey 0x%x", immediate,
         args.message.size(), static_cast<unsigned long long>(remote.addr), remote.rkey);
    //! [post_write_imm]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    sge.length = static_cast<std::uint32_t>(args.message.size());
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; // the data goes to remote memory, the immediate to a receive
    wr.imm_data = htonl(immediate);         // imm_data travels in network byte order
    wr.sg_list = &sge;
    wr.num_sge = args.message.empty() ? 0 : 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote.addr;
    wr.wr.rdma.rkey = remote.rkey;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(RDMA_WRITE_WITH_IMM)");
    //! [post_write_imm]

    step(6, "poll the completion queue until the WRITE completes");
    // our side: IBV_WC_RDMA_WRITE, no "IMM"
    completions.wait(1, IBV_WC_RDMA_WRITE, args.timeout_s, "the RDMA WRITE with immediate");
    result("Requester has written: \"%s\" with immediate 0x%x", args.message.c_str(), immediate);
    // No goodbye, unlike rdma_write: the immediate already gave the responder its completion, and on
    // RC that completion comes only after the written bytes are in its memory. The responder keeps its
    // QP a moment in case its ACK of our WRITE was lost (chapter 2).

    if (args.use_cm) {
        step(7, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_write_immediate_requester",
                           .role = "requester",
                           .summary = "RDMA WRITE with immediate, requester side: write a string, notify with 0xABCD.",
                           .message_flag = 'w',
                           .message_help = "string to write",
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
