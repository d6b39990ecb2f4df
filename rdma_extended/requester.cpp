/**
 * @file requester.cpp
 * @brief The extended verbs API, requester side: WRITE, WRITE with immediate, SEND, READ,
 * fetch-and-add and compare-and-swap, posted with ibv_wr_*() and completed through an extended CQ.
 *
 * Chapters 2 to 7 fill an ibv_send_wr for every request and hand it to ibv_post_send(). The extended
 * API, which perftest, UCX and libfabric use, has no work-request struct: the QP is created with the
 * operations it will post (send_ops_flags), and each request is a call on the QP (ibv_wr_rdma_write(),
 * ibv_wr_set_sge(), ...) between ibv_wr_start() and ibv_wr_complete(), which hands the whole batch to
 * the device at once. Completions are read field by field from a CQ created with the fields it must
 * report.
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

#include <cstring>
#include <optional>
#include <string>

using namespace rdma_samples;
using namespace rdma_extended;

/** This program's own flags; the common ones are in Args. */
struct Options {
    std::uint64_t add = 5;                     ///< --add: what fetch-and-add adds
    std::uint64_t swap = 100;                  ///< --swap: what compare-and-swap writes
    bool timestamps = false;                   ///< --timestamps: ask the CQ for completion timestamps too
    std::optional<std::uint64_t> atomic_write; ///< --atomic-write VALUE: an RDMA atomic write after the swap
    bool ignore_capability = false; ///< --ignore-capability: post the atomic write although the device lacks it
};

/** Our registered memory: what we send from, and where READ and the atomics put what they fetch. */
struct Local {
    char write_text[64];
    char write_imm_text[64];
    char send_text[send_room];
    char read_back[64];   ///< the READ's destination
    std::uint64_t old[2]; ///< the value fetch-and-add found, then the one compare-and-swap found
};

/** The work requests' ids: each completion names its request by them. */
enum WrId : std::uint64_t {
    write_id = 1,
    write_imm_id,
    send_id,
    read_id,
    fetch_add_id,
    compare_swap_id,
    atomic_write_id,
    goodbye_id
};

static void run(const Args &args, const Options &opt)
{
    if (opt.ignore_capability && !opt.atomic_write)
        throw UsageError("--ignore-capability: only with --atomic-write", "add --atomic-write N, or leave it out");
    step(1, "open an RDMA device, check it has immediate data and atomics, allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // (none on iWARP)
    require_atomics(dev);        // ours issues them; the responder's device, which executes them, checks its own
    if (opt.atomic_write && !has_atomic_write(dev)) {
        if (!opt.ignore_capability)
            throw Error(
                "device " + dev.name +
                    " cannot do RDMA atomic write (bit 40 of device_cap_flags_ex, IB_UVERBS_DEVICE_ATOMIC_WRITE, "
                    "is clear; Soft-RoCE sets it from Linux 6.2, this kernel is " +
                    kernel_release() + ")",
                "run without --atomic-write, or on a kernel whose rxe has it (./lab vm --kernel 6.12)");
        info("(demonstration) device %s does not advertise RDMA atomic write: posting one anyway", dev.name.c_str());
    }
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register our %zu bytes (local write: READ and the atomics write into them)", sizeof(Local));
    if (args.message.size() > max_text)
        throw Error("-w is " + std::to_string(args.message.size()) + " bytes; this pair's slots take " +
                        std::to_string(max_text),
                    "write a shorter string with -w");
    Buffer buf(sizeof(Local));
    auto *local = reinterpret_cast<Local *>(buf.data());
    const std::string imm_text = args.message + " (with immediate)";
    std::snprintf(local->write_text, sizeof local->write_text, "%s", args.message.c_str());
    std::snprintf(local->write_imm_text, sizeof local->write_imm_text, "%s", imm_text.c_str());
    std::snprintf(local->send_text, sizeof local->send_text, "sent with ibv_wr_send()");
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create an extended CQ (the fields it reports) and an extended QP (the operations it posts)");
    //! [create_cq_ex]
    // The CQ reports what it was created to report: wr_id and status always, the rest by flag. A flag
    // the device cannot honour fails here, at creation, not at the first poll (Soft-RoCE has no
    // completion timestamps: --timestamps shows it).
    ibv_cq_init_attr_ex cq_attr{};
    cq_attr.cqe = cq_entries(QpCaps{});
    cq_attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN; // READ and the atomics say how many bytes they fetched
    if (opt.timestamps)
        cq_attr.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    CqExPtr send_cq(ibv_create_cq_ex(dev.ctx.get(), &cq_attr));
    if (!send_cq && opt.timestamps && errno == EOPNOTSUPP)
        throw Error("ibv_create_cq_ex failed: " + std::string(std::strerror(EOPNOTSUPP)) + ": device " + dev.name +
                        " cannot stamp completions (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)",
                    "run without --timestamps; a NIC that stamps completions says so in ibv_query_device_ex()'s "
                    "completion_timestamp_mask");
    check(send_cq.get(), "ibv_create_cq_ex");
    //! [create_cq_ex]
    // The receive side only ever takes the responder's descriptor with -cm, through the common exchange,
    // which polls the classic way: a CQ of its own (a QP's send and receive queues may use two CQs).
    CqPtr recv_cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    //! [create_qp_ex]
    // The QP is told up front which operations it will post: the provider prepares them now and refuses
    // one it lacks here (EOPNOTSUPP), where the classic API would fail at the post.
    ibv_qp_init_attr_ex qp_attr{};
    qp_attr.qp_type = IBV_QPT_RC;
    qp_attr.send_cq = ibv_cq_ex_to_cq(send_cq.get());
    qp_attr.recv_cq = recv_cq.get();
    qp_attr.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
    qp_attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    qp_attr.pd = pd.get();
    qp_attr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                             IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                             IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
    if (opt.atomic_write)
        qp_attr.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_WRITE;
    QpPtr qp(check(ibv_create_qp_ex(dev.ctx.get(), &qp_attr), "ibv_create_qp_ex"));
    ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp.get()); // the same QP, seen through its ibv_wr_*() calls
    //! [create_qp_ex]
    qp_to_init(qp.get(), dev, 0);          // we only initiate: the responder may do nothing to our memory
    Completions descriptor(recv_cq.get()); // (-cm: where the responder's descriptor arrives)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its memory's descriptor"
                        : "exchange descriptors with the responder and move the QP to RTS");
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = descriptor,
                                              .peer = "the responder (rdma_extended_responder)",
                                              .rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_init_rd_atom)},
                                             ResourceKind::mmap);
    const ResourceDescriptor &remote = exchange.resource;
    const int needed = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (remote.length < sizeof(Exported) || remote.addr % 8 != 0 || (remote.access & needed) != needed)
        throw Error("the responder exports " + std::to_string(remote.length) + " bytes, access " +
                        access_to_string(remote.access) + ": not the " + std::to_string(sizeof(Exported)) +
                        "-byte, 8-byte aligned region with remote write, read and atomic this pair needs",
                    "run rdma_extended_responder on the other side");
    // Where each operation lands: offsets into the exported region, never beyond it (checked above).
    const std::uint64_t written = remote.addr + offsetof(Exported, written);
    const std::uint64_t written_imm = remote.addr + offsetof(Exported, written_imm);
    const std::uint64_t counter = remote.addr + offsetof(Exported, counter);
    const auto at = [&](const void *p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); };
    const auto len = [](const char *text) { return static_cast<std::uint32_t>(std::strlen(text)); };

    step(5, "post WRITE, WRITE with immediate, SEND, READ and fetch-and-add in one batch");
    //! [batch]
    // ibv_wr_start() opens a batch; each ibv_wr_<opcode>() starts a request, using the wr_id and
    // wr_flags set on the QP just before it, and ibv_wr_set_sge() gives it its local buffer. Nothing
    // reaches the device until ibv_wr_complete(), which posts them all (one doorbell); it fails if any
    // did, and then none was posted.
    ibv_wr_start(qpx);
    qpx->wr_id = write_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, remote.rkey, written);
    ibv_wr_set_sge(qpx, mr->lkey, at(local->write_text), len(local->write_text));

    qpx->wr_id = write_imm_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write_imm(qpx, remote.rkey, written_imm, htobe32(immediate));
    ibv_wr_set_sge(qpx, mr->lkey, at(local->write_imm_text), len(local->write_imm_text));

    qpx->wr_id = send_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, mr->lkey, at(local->send_text), len(local->send_text));

    qpx->wr_id = read_id; // after the WRITE on the same QP: the responder executes them in order
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_read(qpx, remote.rkey, written);
    ibv_wr_set_sge(qpx, mr->lkey, at(local->read_back), len(local->write_text));

    qpx->wr_id = fetch_add_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_fetch_add(qpx, remote.rkey, counter, opt.add);
    ibv_wr_set_sge(qpx, mr->lkey, at(&local->old[0]), sizeof(std::uint64_t));
    check_post(ibv_wr_complete(qpx), "ibv_wr_complete(WRITE, WRITE with immediate, SEND, READ, fetch-and-add)");
    //! [batch]

    step(6, "poll the extended CQ: one completion per request, in the order they were posted");
    //! [poll]
    // Our send queue's next completion: it must be request @p id's (one send queue completes in the order
    // of the posts), a success of @p opcode.
    const auto completed = [&](WrId id, ibv_wc_opcode opcode, const char *what) {
        const Done d = next_done(send_cq.get(), cq_attr.wc_flags, args.timeout_s,
                                 std::string("the completion of ") + what, dev.ctx.get());
        check_done(d, opcode, what);
        if (d.wr_id != id)
            throw Error("the completion of wr_id " + std::to_string(d.wr_id) + " came where " + what + "'s was due",
                        "this should never happen on one send queue; check dmesg");
        return d;
    };
    const struct {
        WrId id;
        ibv_wc_opcode opcode;
        const char *what;
    } expected[] = {{write_id, IBV_WC_RDMA_WRITE, "the RDMA WRITE"},
                    {write_imm_id, IBV_WC_RDMA_WRITE, "the RDMA WRITE with immediate"},
                    {send_id, IBV_WC_SEND, "the SEND"},
                    {read_id, IBV_WC_RDMA_READ, "the RDMA READ"},
                    {fetch_add_id, IBV_WC_FETCH_ADD, "the fetch-and-add"}};
    for (const auto &e : expected) {
        const Done d = completed(e.id, e.opcode, e.what);
        // byte_len is defined for receives, READs and atomics only (ibv_poll_cq(3)): Soft-RoCE also
        // fills it for WRITE and SEND, a NIC may leave it 0.
        if (d.opcode == IBV_WC_RDMA_READ || d.opcode == IBV_WC_FETCH_ADD)
            info("%s completed: %s, %u bytes fetched", e.what, wc_opcode_name(d.opcode), d.byte_len);
        else
            info("%s completed: %s", e.what, wc_opcode_name(d.opcode));
        if (d.timestamp) // (--timestamps, on a device that stamps: its own clock, in its own units)
            info("  completion timestamp %llu", static_cast<unsigned long long>(*d.timestamp));
    }
    //! [poll]
    const std::string read_back(local->read_back, strnlen(local->read_back, sizeof local->read_back));
    result("READ brought back: %s", quote(read_back).c_str());
    if (read_back != local->write_text)
        throw Error("the READ brought back " + quote(read_back) + ", not what our WRITE put there",
                    "is another requester writing into the responder's memory?");
    const std::uint64_t found = local->old[0];
    result("Fetch-and-add: old value %llu, new value %llu", static_cast<unsigned long long>(found),
           static_cast<unsigned long long>(found + opt.add));

    step(7, "post compare-and-swap (what fetch-and-add left -> %llu) and the goodbye SEND in a second batch",
         static_cast<unsigned long long>(opt.swap));
    //! [second_batch]
    // A batch cannot use what it fetches: the value compare-and-swap expects is what fetch-and-add
    // returned, so it waits for the first batch's completions. The goodbye, a SEND with no data, goes
    // after it: the responder reads the counter once the goodbye arrives.
    ibv_wr_start(qpx);
    qpx->wr_id = compare_swap_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_cmp_swp(qpx, remote.rkey, counter, found + opt.add, opt.swap);
    ibv_wr_set_sge(qpx, mr->lkey, at(&local->old[1]), sizeof(std::uint64_t));
    if (opt.atomic_write) {
        //! [atomic_write]
        // RDMA atomic write: 8 bytes placed at once (no reader of the counter sees half of them), ordered
        // like a WRITE, nothing fetched back. The value travels in the request (no local buffer, no sge).
        qpx->wr_id = atomic_write_id;
        qpx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_atomic_write(qpx, remote.rkey, counter, &*opt.atomic_write);
        //! [atomic_write]
    }
    qpx->wr_id = goodbye_id;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qpx);
    ibv_wr_set_sge_list(qpx, 0, nullptr); // no data: the message itself is the signal
    check_post(ibv_wr_complete(qpx), opt.atomic_write ? "ibv_wr_complete(compare-and-swap, atomic write, goodbye)"
                                                      : "ibv_wr_complete(compare-and-swap, goodbye)");
    //! [second_batch]
    completed(compare_swap_id, IBV_WC_COMP_SWAP, "the compare-and-swap");
    const bool swapped = local->old[1] == found + opt.add;
    result("Compare-and-swap: found %llu, %s", static_cast<unsigned long long>(local->old[1]),
           swapped ? "swapped" : "not swapped (another requester changed the counter)");
    std::uint64_t final_value = swapped ? opt.swap : local->old[1];
    if (opt.atomic_write) {
        completed(atomic_write_id, IBV_WC_ATOMIC_WRITE, "the RDMA atomic write");
        result("Atomic write: %llu placed", static_cast<unsigned long long>(*opt.atomic_write));
        final_value = *opt.atomic_write;
    }
    completed(goodbye_id, IBV_WC_SEND, "the goodbye SEND");
    result("Expected final counter value: %llu", static_cast<unsigned long long>(final_value));

    if (args.use_cm) {
        step(8, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_extended_requester",
                     .role = "requester",
                     .summary = "The extended verbs API, requester side: six RC operations posted with ibv_wr_*().",
                     .message_flag = 'w',
                     .message_help = "what the WRITE puts into the responder's memory, and the READ reads back",
                     .rdma_cm = true};
    spec.extra.push_back({"add", "N", "what fetch-and-add adds", "5",
                          [&](const std::string &v) { opt.add = parse_number("--add", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"swap", "N", "what compare-and-swap writes", "100",
                          [&](const std::string &v) { opt.swap = parse_number("--swap", v, 0, UINT64_MAX); }});
    spec.extra.push_back(
        {"atomic-write", "N", "after compare-and-swap, an RDMA atomic write of N into the counter (Linux 6.2+ on rxe)",
         "off", [&](const std::string &v) { opt.atomic_write = parse_number("--atomic-write", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"ignore-capability", "",
                          "demonstration: post the atomic write although the device does not advertise it", "",
                          [&](const std::string &) { opt.ignore_capability = true; }});
    spec.extra.push_back({"timestamps", "", "also ask the CQ for completion timestamps (Soft-RoCE has none)", "",
                          [&](const std::string &) { opt.timestamps = true; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
