/**
 * @file requester.cpp
 * @brief Remote sync event, requester side: set the responder's 64-bit event and read it back.
 *
 * DOCA's "sync event" is a 64-bit value that peers set ("notify set") and read ("get"). On plain
 * verbs it is one naturally aligned 64-bit word in a registered memory region: notify-set is an
 * 8-byte RDMA WRITE, get is an 8-byte RDMA READ. The flow uses DOCA's values: we set 0xD0CA, read until
 * the responder has answered with 0xD0CB, then set UINT64_MAX to say we are done.
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
#include <cstdint>
#include <cstring>

using namespace rdma_samples;

using doca::done_value;   // UINT64_MAX, DOCA's completion value
using doca::notify_value; // 0xD0CA, DOCA's first notify-set

/** One 8-byte RDMA WRITE (notify-set) or READ (get) of the remote event: post it, poll until it completes. */
static void post_event_op(const Args &args, ibv_qp *qp, Completions &completions, const ibv_mr *mr, char *local,
                          const ResourceDescriptor &event, ibv_wr_opcode opcode)
{
    const bool notify_set = opcode == IBV_WR_RDMA_WRITE;
    //! [post_event_op]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(local); // the value to set, or where the read lands
    sge.length = sizeof(std::uint64_t);
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 1;       // comes back in the completion: how the poll loop below finds it
    wr.opcode = opcode; // IBV_WR_RDMA_WRITE = notify-set, IBV_WR_RDMA_READ = get
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = event.addr;
    wr.wr.rdma.rkey = event.rkey;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp, &wr, &bad_wr),
               notify_set ? "ibv_post_send(RDMA_WRITE: notify-set)" : "ibv_post_send(RDMA_READ: get)");

    const char *what = notify_set ? "the notify-set (RDMA WRITE)" : "the get (RDMA READ)";
    completions.wait(1, notify_set ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ, args.timeout_s, what);
    //! [post_event_op]
}

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register 16 bytes: the value we set, and where the values we get land (local read/write)");
    Buffer buf(2 * sizeof(std::uint64_t));
    char *set = buf.data(), *got = buf.data() + sizeof(std::uint64_t);
    // (On iWARP a READ's sink needs remote write too: rdma_read's requester, step 2, says why.)
    const int access = IBV_ACCESS_LOCAL_WRITE | (is_iwarp(dev) ? IBV_ACCESS_REMOTE_WRITE : 0);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get()); // our poll loops find each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its sync-event descriptor"
                        : "exchange descriptors with the responder and get its sync-event descriptor");
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_init_rd_atom); // for the READs (chapter 3)
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the responder (rdma_sync_event_responder)",
                                              .rd_atomic = rd_atomic},
                                             ResourceKind::sync_event);
    const ResourceDescriptor &event = exchange.resource;
    info("sync event at addr 0x%llx, length %u, rkey 0x%x, access %s", static_cast<unsigned long long>(event.addr),
         event.length, event.rkey, access_to_string(event.access).c_str());
    //! [checks]
    // A sync event is exactly one aligned 64-bit word: anything else is refused before posting.
    if (event.length != sizeof(std::uint64_t))
        throw Error("the sync-event descriptor says " + std::to_string(event.length) +
                        " bytes; a sync event is one 8-byte word; nothing was posted",
                    "the responder must export exactly its 8-byte counter");
    if (event.addr % sizeof(std::uint64_t) != 0)
        throw Error("the sync event's address is not 8-byte aligned; nothing was posted",
                    "the responder must export an 8-byte aligned 64-bit word: the event");
    const int needed = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if ((event.access & needed) != needed)
        throw Error("the sync event does not grant remote read and write (access " + access_to_string(event.access) +
                        ")",
                    "the responder must register its counter with IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE");
    //! [checks]

    step(5, "notify-set: RDMA WRITE 0x%llx into the remote event", static_cast<unsigned long long>(notify_value));
    std::memcpy(set, &notify_value, sizeof notify_value);
    post_event_op(args, qp.get(), completions, mr.get(), set, event, IBV_WR_RDMA_WRITE);

    step(6, "get: RDMA READ the event until the responder has moved it past 0x%llx",
         static_cast<unsigned long long>(notify_value));
    //! [get_loop]
    std::uint64_t value = 0, last = notify_value;
    Waiter waiter(args.timeout_s, "the sync event to pass 0xd0ca (the responder signals 0xd0cb)",
                  "the responder is stopped or gone; check its output");
    for (;;) {
        post_event_op(args, qp.get(), completions, mr.get(), got, event, IBV_WR_RDMA_READ);
        std::memcpy(&value, got, sizeof value);
        if (value != last) {
            result("Received sync event value 0x%llx", static_cast<unsigned long long>(value));
            last = value;
        }
        if (value > notify_value)
            break;
        waiter.pause(); // read again a little later; gives up after -t seconds
    }
    //! [get_loop]

    step(7, "notify-set the completion value UINT64_MAX");
    std::memcpy(set, &done_value, sizeof done_value);
    post_event_op(args, qp.get(), completions, mr.get(), set, event, IBV_WR_RDMA_WRITE);
    result("Remote sync event has been notified for completion successfully");

    step(8, "say goodbye with a zero-length SEND, so the responder may release its memory");
    say_goodbye(qp.get(), completions, args.timeout_s); // chapter 2, step 8, written out

    if (args.use_cm) {
        step(9, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_sync_event_requester",
                           .role = "requester",
                           .summary =
                               "Remote sync event, requester side: notify-set and get the responder's 64-bit event.",
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
