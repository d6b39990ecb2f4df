/**
 * @file responder.cpp
 * @brief Atomics, responder side: export a 64-bit counter and print what the requester made of it.
 *
 * The counter is one naturally aligned 64-bit word (the start of a page-aligned buffer). The
 * responder's CPU takes no part in the atomics; it waits for the requester's goodbye and then reads
 * the final value.
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
    std::uint64_t initial = 0;     ///< --initial: the counter's first value
    bool no_atomic_access = false; ///< --no-atomic-access: the demonstration below
};

/** --no-atomic-access: register the counter without remote atomic (the QP still grants it). The
 *  requester refuses such an export, or, with --ignore-access, its atomic fails at our device. */
static int no_atomic_access(int access)
{
    access &= ~IBV_ACCESS_REMOTE_ATOMIC;
    info("(demonstration) the counter grants no remote atomic: access %s", access_to_string(access).c_str());
    return access;
}

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device, check it executes atomics, allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    //! [atomic_cap]
    // The atomics run HERE: our device does the read-modify-write on our memory, so its atomic_cap is
    // the one that counts. IBV_ATOMIC_HCA (ConnectX, Soft-RoCE) makes them atomic only against other
    // atomics through this device: a CPU store or an RDMA WRITE to the counter meanwhile could be lost.
    require_atomics(dev);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // (an iWARP device with atomics connects through RDMA CM only)
    //! [atomic_cap]
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register an 8-byte counter holding %llu (local read/write + remote atomic)",
         static_cast<unsigned long long>(opt.initial));
    Buffer buf(sizeof(std::uint64_t));                         // page-aligned, so the counter is 8-byte aligned
    std::memcpy(buf.data(), &opt.initial, sizeof opt.initial); // in our host order: atomics work on it as is
    //! [reg_mr]
    // Remote atomic lets the requester's device read-modify-write this word; it implies no remote
    // read or write. Both the memory region and the QP must grant it. (Without any remote flag, as
    // with --no-atomic-access, the region has no usable remote key: Soft-RoCE hands out rkey 0.)
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if (opt.no_atomic_access)
        access = no_atomic_access(access);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create a completion queue and an RC queue pair that accepts remote atomics");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_ATOMIC); // the QP must grant remote atomic too
    Completions completions(cq.get());                   // our poll loop finds each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post a receive for the requester's goodbye");
    post_goodbye_receive(qp.get(), mr.get()); // an empty entry: the goodbye carries no data (chapter 2)

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our counter's descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the counter");
    //! [dest_rd_atomic]
    // Responder resources (max_dest_rd_atomic): atomics, like READs, that the requester may have in
    // flight at us; our device keeps each one's result until it is sent back. Bounded by the device's
    // max_qp_rd_atom; at least 1, because with 0 our QP refuses every incoming atomic.
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_rd_atom); // as for READs (chapter 3)
    //! [dest_rd_atomic]
    // exactly the counter
    ResourceDescriptor counter = describe_export(mr.get(), access, ResourceKind::mmap, sizeof(std::uint64_t));
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the requester (rdma_atomic_requester)",
                                          .rd_atomic = rd_atomic},
                                         &counter);

    step(6, "wait for the goodbye; the atomics themselves give us no completion");
    completions.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s,
                     "the requester's goodbye (a zero-length SEND after its atomics)");
    std::uint64_t value = 0;
    std::memcpy(&value, buf.data(), sizeof value);
    result("Final counter value: %llu (0x%llx)", static_cast<unsigned long long>(value),
           static_cast<unsigned long long>(value));

    step(7, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_atomic_responder",
                     .role = "responder",
                     .summary =
                         "Atomics, responder side: export a 64-bit counter for fetch-and-add and compare-and-swap.",
                     .rdma_cm = true};
    spec.extra.push_back({"initial", "N", "the counter's first value", "0",
                          [&](const std::string &v) { opt.initial = parse_number("--initial", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"no-atomic-access", "", "demonstration: register the counter without remote atomic", "",
                          [&](const std::string &) { opt.no_atomic_access = true; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
