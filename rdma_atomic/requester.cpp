/**
 * @file requester.cpp
 * @brief Atomics, requester side: fetch-and-add and compare-and-swap on the responder's 64-bit counter.
 *
 * An atomic is a one-sided operation on one naturally aligned 64-bit word of remote memory: the
 * responder's device reads it, changes it and returns the old value in one indivisible step, with
 * respect to other atomics through that device (IBV_ATOMIC_HCA; see require_atomics()).
 * DOCA documents these tasks but ships no sample; this pair fills the gap.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

using namespace rdma_samples;

/** This program's own flags; the common ones are in Args. */
struct Options {
    bool fetch_add = true, compare_swap = true; ///< --op fetch-add|compare-swap|both
    std::uint64_t add = 1;                      ///< --add
    std::optional<std::uint64_t> compare;       ///< --compare (default: what the fetch-add left, or 0)
    std::uint64_t swap = 100;                   ///< --swap
    bool ignore_access = false;                 ///< --ignore-access: post although the export refuses atomics
};

/** Post one atomic on the counter and poll until it completes; return the old value it fetched. */
static std::uint64_t post_atomic(const Args &args, ibv_qp *qp, Completions &completions, const ibv_mr *mr,
                                 const ResourceDescriptor &counter, ibv_wr_opcode opcode, std::uint64_t compare_add,
                                 std::uint64_t swap)
{
    const bool fadd = opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    //! [post_atomic]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(mr->addr); // 8 bytes: the device stores the old value here
    sge.length = sizeof(std::uint64_t);
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 1;       // comes back in the completion: the poll loop looks for it
    wr.opcode = opcode; // IBV_WR_ATOMIC_FETCH_AND_ADD or IBV_WR_ATOMIC_CMP_AND_SWP
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = counter.addr; // must be 8-byte aligned
    wr.wr.atomic.rkey = counter.rkey;
    wr.wr.atomic.compare_add = compare_add; // the addend, or the value compared with
    wr.wr.atomic.swap = swap;               // the new value if the comparison holds (CMP_AND_SWP only)
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp, &wr, &bad_wr),
               fadd ? "ibv_post_send(ATOMIC_FETCH_AND_ADD)" : "ibv_post_send(ATOMIC_CMP_AND_SWP)");

    const char *what = fadd ? "the fetch-and-add" : "the compare-and-swap";
    completions.wait(1, fadd ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP, args.timeout_s, what);
    //! [post_atomic]
    if (!(counter.access & IBV_ACCESS_REMOTE_ATOMIC)) // (--ignore-access: the responder's device must refuse it)
        throw Error(std::string(what) + " succeeded although the responder granted no remote atomic",
                    "the responder's memory region must not include IBV_ACCESS_REMOTE_ATOMIC");
    //! [byte_order]
    // Byte order: compare_add and swap are given in our host order, and the old value comes back in
    // our host order too; on the wire the devices carry all three big-endian (network order). The
    // responder's device operates on the counter as a 64-bit integer in the responder's host order,
    // so both sides simply use uint64_t (measured on little-endian x86 with Soft-RoCE; the bytes
    // printed below show it).
    std::uint64_t old = 0;
    std::memcpy(&old, mr->addr, sizeof old);
    //! [byte_order]
    const auto *b = static_cast<const unsigned char *>(mr->addr);
    info("the old value as stored in our buffer, byte by byte: %02x %02x %02x %02x %02x %02x %02x %02x = 0x%016llx",
         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], static_cast<unsigned long long>(old));
    return old;
}

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device, check it supports atomics, allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_atomics(dev); // ours issues them; the responder's device, which executes them, checks its own
    require_rdma_cm_on_iwarp(dev, args.use_cm); // (an iWARP device with atomics connects through RDMA CM only)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register an 8-byte buffer for the old values (local write: the device writes into it)");
    Buffer buf(sizeof(std::uint64_t));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0);      // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get()); // our poll loops find each completion by its wr_id (chapter 2)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, args.use_cm ? "connect to the responder with RDMA CM; it SENDs its counter's descriptor"
                        : "exchange descriptors with the responder and move the QP to RTS");
    //! [rd_atomic]
    // Atomics, like READs, wait for response data (the old value), so they count against the same
    // limit: max_rd_atomic, the number we may have in flight at the responder (initiator depth),
    // bounded by the device's max_qp_init_rd_atom. With 0 no atomic could be posted. The responder
    // sets the matching max_dest_rd_atomic from its max_qp_rd_atom.
    const int rd_atomic = rd_atomic_depth(dev.device_attr.max_qp_init_rd_atom); // as for READs (chapter 3)
    //! [rd_atomic]
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the responder (rdma_atomic_responder)",
                                              .rd_atomic = rd_atomic},
                                             ResourceKind::mmap);
    const ResourceDescriptor &counter = exchange.resource;
    info("responder exports addr 0x%llx, length %u, rkey 0x%x, access %s",
         static_cast<unsigned long long>(counter.addr), counter.length, counter.rkey,
         access_to_string(counter.access).c_str());

    step(5, "check the counter is an exported, aligned 64-bit word that grants remote atomic");
    //! [checks]
    if (counter.length < sizeof(std::uint64_t))
        throw Error("the responder exported " + std::to_string(counter.length) + " bytes; an atomic needs 8",
                    "check the descriptor");
    char addr[24];
    std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(counter.addr));
    if (counter.addr % sizeof(std::uint64_t) != 0)
        throw Error(std::string("remote address ") + addr + " is not 8-byte aligned; nothing was posted",
                    "atomics work on a naturally aligned 64-bit word; the responder must export an aligned counter");
    if (!(counter.access & IBV_ACCESS_REMOTE_ATOMIC) && !opt.ignore_access)
        throw Error("the responder's memory does not grant remote atomic (access " + access_to_string(counter.access) +
                        ")",
                    "the responder must register its counter with IBV_ACCESS_REMOTE_ATOMIC");
    //! [checks]
    if (!(counter.access & IBV_ACCESS_REMOTE_ATOMIC)) // --ignore-access: the steps below post it anyway
        info("(demonstration) the export grants %s, no remote atomic: posting anyway",
             access_to_string(counter.access).c_str());

    std::optional<std::uint64_t> now; // the counter's value after our last operation
    int next_step = 6;                // --op picks one operation or both: the steps stay consecutive
    if (opt.fetch_add) {
        step(next_step++, "post an atomic fetch-and-add of %llu", static_cast<unsigned long long>(opt.add));
        const std::uint64_t old =
            post_atomic(args, qp.get(), completions, mr.get(), counter, IBV_WR_ATOMIC_FETCH_AND_ADD, opt.add, 0);
        now = old + opt.add;
        result("Fetch-and-add: old value %llu, new value %llu", static_cast<unsigned long long>(old),
               static_cast<unsigned long long>(*now));
    }
    if (opt.compare_swap) {
        const std::uint64_t expect = opt.compare.value_or(now.value_or(0));
        step(next_step++, "post an atomic compare-and-swap: if the counter is %llu, make it %llu",
             static_cast<unsigned long long>(expect), static_cast<unsigned long long>(opt.swap));
        const std::uint64_t found =
            post_atomic(args, qp.get(), completions, mr.get(), counter, IBV_WR_ATOMIC_CMP_AND_SWP, expect, opt.swap);
        const bool swapped = found == expect;
        result("Compare-and-swap: found %llu, %s", static_cast<unsigned long long>(found),
               swapped ? "swapped" : "not swapped");
        if (now && found != *now)
            throw Error("compare-and-swap found " + std::to_string(found) + " but fetch-and-add left " +
                            std::to_string(*now),
                        "another requester changed the counter in between?");
        now = swapped ? opt.swap : found;
    }
    result("Expected final counter value: %llu", static_cast<unsigned long long>(*now));

    step(next_step++, "say goodbye with a zero-length SEND, so the responder may read its counter");
    say_goodbye(qp.get(), completions, args.timeout_s); // chapter 2, step 8, written out

    if (args.use_cm) {
        step(next_step, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_atomic_requester",
                     .role = "requester",
                     .summary =
                         "Atomics, requester side: fetch-and-add and compare-and-swap on the responder's counter.",
                     .rdma_cm = true};
    spec.extra.push_back({"op", "OP", "fetch-add, compare-swap or both", "both", [&](const std::string &v) {
                              if (v != "fetch-add" && v != "compare-swap" && v != "both")
                                  throw UsageError("--op: expected fetch-add, compare-swap or both, got " + quote(v));
                              opt.fetch_add = v != "compare-swap";
                              opt.compare_swap = v != "fetch-add";
                          }});
    spec.extra.push_back({"add", "N", "what fetch-and-add adds", "1",
                          [&](const std::string &v) { opt.add = parse_number("--add", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"compare", "N", "what compare-and-swap expects to find", "the value the fetch-add left, or 0",
                          [&](const std::string &v) { opt.compare = parse_number("--compare", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"swap", "N", "what compare-and-swap writes when it finds --compare", "100",
                          [&](const std::string &v) { opt.swap = parse_number("--swap", v, 0, UINT64_MAX); }});
    spec.extra.push_back({"ignore-access", "", "demonstration: post even if the export lacks remote atomic", "",
                          [&](const std::string &) { opt.ignore_access = true; }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
