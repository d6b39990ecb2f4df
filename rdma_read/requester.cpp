/**
 * @file requester.cpp
 * @brief RDMA READ, requester side: copy the responder's exported buffer into ours.
 *
 * A READ is one-sided like a WRITE, in the other direction: our device asks, the responder's device
 * answers from its memory, and the responder's CPU takes no part and sees no completion. The QP's
 * RTR and RTS transitions are written out in rdma_write/requester.cpp; connect_to_responder() does
 * them here, after the exchange.
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

/** This program's own flags; the common ones are in Args. */
struct Options {
    std::uint32_t length = 0; ///< --length: bytes to read; 0 = the whole exported range
    bool try_write = false;   ///< --try-write: a WRITE instead of the READ, which the responder refuses
};

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte buffer for the READ to fill (local read/write, not exported)", max_message_length);
    Buffer buf(max_message_length);
    // DOCA's table: the requester's mmap is local read/write. Local write matters here: our device
    // writes the bytes it reads from the responder into this buffer.
    //! [iwarp_sink]
    int access = IBV_ACCESS_LOCAL_WRITE;
    if (is_iwarp(dev)) {
        // iWARP: the READ names this buffer as its data sink, and the responder's answer arrives as a
        // tagged write into it, so the sink must allow remote write (the kernel's own READs register
        // their sink so on iWARP: drivers/infiniband/core/rw.c; Soft-iWARP itself checks only local
        // write, siw_qp_rx.c siw_proc_rresp(), but iWARP NICs hold you to it). The buffer is not exported,
        // but the READ request itself tells the responder its STag (RFC 5040, 4.4).
        access |= IBV_ACCESS_REMOTE_WRITE;
    }
    //! [iwarp_sink]
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get()); // our poll loops find each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its mmap descriptor"
                        : "exchange descriptors with the responder and move the QP to RTS");
    //! [rd_atomic]
    // A READ waits for its response data, so the QP must allow READs "in flight": max_rd_atomic on our
    // side (initiator depth), bounded by the device's max_qp_init_rd_atom. The responder sets the
    // matching max_dest_rd_atomic (responder resources). With 0 here, what happens depends on the
    // device: mlx5 treats it as 1, Soft-RoCE never sends the READ. So: at least 1.
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_init_rd_atom, 16));
    //! [rd_atomic]
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the responder (rdma_read_responder)",
                                              .rd_atomic = rd_atomic},
                                             ResourceKind::mmap);
    const ResourceDescriptor &remote = exchange.resource;
    info("responder exports addr 0x%llx, length %u, rkey 0x%x, access %s", static_cast<unsigned long long>(remote.addr),
         remote.length, remote.rkey, access_to_string(remote.access).c_str());

    const std::uint32_t len = opt.length != 0 ? opt.length : std::min<std::uint32_t>(remote.length, max_message_length);
    step(5, "check the READ stays inside what the responder exported and granted");
    //! [range_check]
    if (len > remote.length || len > buf.size())
        throw Error("a READ of " + std::to_string(len) + " bytes would go past the " + std::to_string(remote.length) +
                        " bytes the responder exported; nothing was posted",
                    "read at most the exported length (--length " + std::to_string(remote.length) + ")");
    //! [range_check]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // where the bytes land, here
    sge.length = len;
    sge.lkey = mr->lkey;
    // --try-write, the demonstration: post an RDMA WRITE through the same rkey instead, skipping our own
    // permission check, and let the responder's device refuse it. It granted remote read only; which
    // status says so is device-dependent: a device that checks the QP's access flags first NAKs an
    // invalid request (IBV_WC_REM_INV_REQ_ERR: Soft-RoCE, qib); one that checks the memory region first
    // says IBV_WC_REM_ACCESS_ERR (chapter 3).
    if (opt.try_write)
        info("(demonstration) the export grants %s, no remote write: posting a WRITE anyway",
             access_to_string(remote.access).c_str());
    else if (!(remote.access & IBV_ACCESS_REMOTE_READ))
        throw Error("the responder's memory does not grant remote read (access " + access_to_string(remote.access) +
                        ")",
                    "the responder must register its buffer with IBV_ACCESS_REMOTE_READ");
    const char *op = opt.try_write ? "WRITE" : "READ";
    const ibv_wr_opcode opcode = opt.try_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;

    step(6, "post an RDMA %s of %u bytes at remote addr 0x%llx, rkey 0x%x",
         opt.try_write ? "WRITE (demonstration)" : "READ", len, static_cast<unsigned long long>(remote.addr),
         remote.rkey);
    //! [post_read]
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = opcode; // IBV_WR_RDMA_READ: pull remote bytes into our buffer (sge)
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote.addr; // where they come from, there
    wr.wr.rdma.rkey = remote.rkey;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp.get(), &wr, &bad_wr),
               opt.try_write ? "ibv_post_send(RDMA_WRITE)" : "ibv_post_send(RDMA_READ)");
    //! [post_read]

    step(7, "poll the completion queue until the %s completes", op);
    completions.wait(1, opt.try_write ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ, args.timeout_s,
                     opt.try_write ? "the RDMA WRITE into memory that grants only remote read" : "the RDMA READ");
    if (opt.try_write) // the responder's device should have refused it
        throw Error("the RDMA WRITE succeeded although the responder granted only remote read",
                    "the responder's memory region must not include IBV_ACCESS_REMOTE_WRITE");
    const std::size_t n = strnlen(buf.data(), len);
    result("Read from responder: \"%.*s\"", static_cast<int>(n), buf.data());

    step(8, "say goodbye with a zero-length SEND, so the responder may release its memory");
    say_goodbye(qp.get(), completions, args.timeout_s); // chapter 2, step 8, written out

    if (args.use_cm) {
        step(9, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_read_requester",
                     .role = "requester",
                     .summary = "RDMA READ, requester side: read the string the responder exports.",
                     .rdma_cm = true};
    spec.extra.push_back({"length", "BYTES",
                          "bytes to read; more than the responder exported is refused before posting",
                          "the exported length", [&](const std::string &v) {
                              opt.length = static_cast<std::uint32_t>(parse_number("--length", v, 1, 1u << 30));
                          }});
    spec.extra.push_back({"try-write", "", "demonstration: WRITE instead of READ; fails with IBV_WC_REM_ACCESS_ERR", "",
                          [&](const std::string &) { opt.try_write = true; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
