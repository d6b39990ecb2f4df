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
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>

using namespace rdma_samples;

namespace {
constexpr std::uint64_t notify_value = 0xD0CA;  // the requester's first notify-set
constexpr std::uint64_t signal_value = 0xD0CB;  // our answer
constexpr std::uint64_t done_value = UINT64_MAX; // the requester's completion value
bool never_signal = false;                       // --never-signal: demonstration of a get that times out

/** Wait (bounded) until the event is at least @p target; return what it holds then. */
std::uint64_t wait_for_event(std::atomic_ref<std::uint64_t> event, std::uint64_t target, int timeout_s)
{
    //! [wait_value]
    char what[64];
    std::snprintf(what, sizeof what, "the sync event to reach 0x%llx", static_cast<unsigned long long>(target));
    Waiter waiter(timeout_s, what, "the requester is gone or has not started; check its output");
    std::uint64_t v;
    while ((v = event.load(std::memory_order_acquire)) < target)
        waiter.pause(); // yields, then sleeps a little: a long wait does not burn a core
    //! [wait_value]
    return v;
}
} // namespace

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register the 8-byte sync event (local read/write + remote read/write)");
    Buffer buf(sizeof(std::uint64_t)); // page-aligned, so the event is 8-byte aligned; starts at 0
    //! [reg_mr]
    // The requester sets the event (remote write) and gets it (remote read). On x86 with PCIe (and
    // Soft-RoCE on x86) an aligned 8-byte word is placed as one unit, so polling it never sees half a
    // set; verbs do not promise that (ibv_query_qp_data_in_order(3) says where it holds).
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    //! [reg_mr]
    std::atomic_ref<std::uint64_t> event(*reinterpret_cast<std::uint64_t *>(buf.data()));

    step(3, "create a completion queue and an RC queue pair that accepts remote reads and writes");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    Completions done(cq.get()); // every wait finds its own completion by wr_id
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);

    step(4, "post a receive for the requester's goodbye");
    post_goodbye_receive(qp.get());

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM, then SEND it our sync-event descriptor"
                        : "wait for the requester, move the QP to RTR and RTS, export the sync event");
    const int rd_atomic = std::max(1, std::min(dev.device_attr.max_qp_rd_atom, 16)); // the requester's READs
    ResourceDescriptor se{};
    se.kind = ResourceKind::sync_event;
    se.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    se.length = sizeof(std::uint64_t);
    se.rkey = mr->rkey;
    se.access = access;
    Exchange x = accept_requester(args, dev, pd.get(), qp.get(), done, "the requester (rdma_sync_event_requester)",
                                  rd_atomic, &se);

    step(6, "wait until the requester has set the event to 0x%llx", static_cast<unsigned long long>(notify_value));
    result("Sync event value 0x%llx received", static_cast<unsigned long long>(wait_for_event(event, notify_value, args.timeout_s)));

    if (never_signal) {
        step(7, "(demonstration) never signal: the requester's get keeps reading 0xd0ca");
        wait_for_event(event, signal_value, args.timeout_s); // never reached: ends in a timeout
    }
    step(7, "signal the requester: set the event to 0x%llx locally", static_cast<unsigned long long>(signal_value));
    result("Signaling sync event");
    event.store(signal_value, std::memory_order_release);

    step(8, "wait for the completion value UINT64_MAX");
    wait_for_event(event, done_value, args.timeout_s);
    result("Sync event completion value 0x%llx received", static_cast<unsigned long long>(done_value));

    step(9, "wait for the goodbye, then release the event");
    done.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s, "the requester's goodbye (a zero-length SEND)");

    if (args.use_cm) {
        step(10, "disconnect from the requester (RDMA CM)");
        cm_disconnect(x.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_sync_event_responder",
                     .role = "responder",
                     .summary = "Remote sync event, responder side: export a 64-bit event, wait on it, signal back.",
                     .rdma_cm = true};
    spec.extra.push_back({"never-signal", "", "demonstration: never set 0xD0CB, so the requester's get times out", "",
                          [](const std::string &) { never_signal = true; }});
    return run_sample(spec, argc, argv, run);
}
