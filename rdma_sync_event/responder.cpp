/**
 * @file responder.cpp
 * @brief Remote sync event, responder side: a 64-bit event the requester sets and reads remotely.
 *
 * The event is one 8-byte aligned word in a registered memory region. The requester changes it with
 * RDMA WRITEs and reads it with RDMA READs; our CPU sees those changes only by reading the word. So we
 * wait by polling it: an atomic load (the compiler may not keep the value in a register, because the
 * device, not this thread, changes it), bounded by -t, with a short sleep between reads.
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

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>

using namespace rdma_samples;

using doca::done_value;   // UINT64_MAX, the requester's completion value
using doca::notify_value; // 0xD0CA, the requester's first notify-set
using doca::signal_value; // 0xD0CB, our answer

/** This program's own flags; the common ones are in Args. */
struct Options {
    bool never_signal = false; ///< --never-signal: the demonstration below
};

/** Wait (bounded) until the event is at least @p target; return what it holds then. */
static std::uint64_t wait_for_event(std::atomic_ref<std::uint64_t> event, std::uint64_t target, int timeout_s)
{
    //! [wait_value]
    char what[64];
    std::snprintf(what, sizeof what, "the sync event to reach 0x%llx", static_cast<unsigned long long>(target));
    Waiter waiter(timeout_s, what, "the requester is gone or has not started; check its output");
    std::uint64_t value;
    while ((value = event.load(std::memory_order_acquire)) < target)
        waiter.pause(); // yields, then sleeps a little: a long wait does not burn a core
    //! [wait_value]
    return value;
}

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register the 8-byte sync event (local read/write + remote read/write)");
    Buffer buf(sizeof(std::uint64_t)); // page-aligned, so the event is 8-byte aligned; starts at 0
    //! [reg_mr]
    // The requester sets the event (remote write) and gets it (remote read). On x86 with PCIe (and
    // Soft-RoCE on x86) an aligned 8-byte word is placed as one unit, so polling it never sees half a
    // set. Verbs do not promise that: ibv_query_qp_data_in_order(3) promises only in-order placement
    // within one WQE, not an untorn 8-byte value. Portable: WRITE with immediate or SEND (chapter 8).
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    //! [reg_mr]
    std::atomic_ref<std::uint64_t> event(*reinterpret_cast<std::uint64_t *>(buf.data()));

    step(3, "create a completion queue and an RC queue pair that accepts remote reads and writes");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE); // the QP must grant both too
    Completions completions(cq.get()); // our poll loop finds each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post a receive for the requester's goodbye");
    //! [completions]
    // Our CQ sees at most two completions. With -cm, the SEND of our descriptor: accept_requester()
    // waits for it by its wr_id. And this receive: the goodbye can only complete after the requester's
    // last WRITE (an RC QP executes in order), so it waits in the CQ until step 9 polls it; or it is
    // flushed (IBV_WC_WR_FLUSH_ERR) if our QP fails. The requester's WRITEs and READs complete
    // nothing here: we see them only by reading the event.
    post_goodbye_receive(qp.get(), mr.get()); // an empty entry: the goodbye carries no data (chapter 2)
    //! [completions]

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our sync-event descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the sync event");
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_rd_atom); // the requester's READs (chapter 3)
    ResourceDescriptor se = describe_export(mr.get(), access, ResourceKind::sync_event, sizeof(std::uint64_t));
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the requester (rdma_sync_event_requester)",
                                          .rd_atomic = rd_atomic},
                                         &se);

    step(6, "wait until the requester has set the event to 0x%llx", static_cast<unsigned long long>(notify_value));
    result("Sync event value 0x%llx received",
           static_cast<unsigned long long>(wait_for_event(event, notify_value, args.timeout_s)));

    if (opt.never_signal) { // the requester's get keeps reading 0xd0ca until its -t runs out; so does our wait
        step(7, "(demonstration) never signal: the requester's get keeps reading 0xd0ca");
        wait_for_event(event, signal_value, args.timeout_s);
        throw Error("the sync event reached 0xd0cb although we never signalled", "is another requester setting it?");
    }
    step(7, "signal the requester: set the event to 0x%llx locally", static_cast<unsigned long long>(signal_value));
    result("Signaling sync event");
    event.store(signal_value, std::memory_order_release);

    step(8, "wait for the completion value UINT64_MAX");
    wait_for_event(event, done_value, args.timeout_s);
    result("Sync event completion value 0x%llx received", static_cast<unsigned long long>(done_value));

    step(9, "wait for the goodbye, then release the event");
    completions.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s, "the requester's goodbye (a zero-length SEND)");

    step(10, args.use_cm ? "disconnect from the requester (RDMA CM)"
                         : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_sync_event_responder",
                     .role = "responder",
                     .summary = "Remote sync event, responder side: export a 64-bit event, wait on it, signal back.",
                     .rdma_cm = true};
    spec.extra.push_back({"never-signal", "", "demonstration: never set 0xD0CB, so the requester's get times out", "",
                          [&](const std::string &) { opt.never_signal = true; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
