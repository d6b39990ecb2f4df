/**
 * @file requester.cpp
 * @brief Recovery, requester side: a QP in the error state brought back, and the work finished.
 *
 * The requester posts --count RDMA WRITEs into the responder's slots; WRITE #--fail-at carries a
 * wrong rkey. The responder's device refuses it (a NAK), which on RC ends the connection for both
 * QPs: ours completes that WRITE with IBV_WC_REM_ACCESS_ERR and flushes every request behind it
 * (IBV_WC_WR_FLUSH_ERR); the responder's QP goes to ERR too. A QP in ERR never sends again. The way
 * back (IBTA): drain every completion, ERR -> RESET -> INIT -> RTR -> RTS, with new PSNs agreed with
 * the peer, who does the same; then post again what did not complete. Chapter 17 explains each step.
 */
#include "recovery.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

using namespace rdma_samples;

namespace rdma_recovery {
namespace {

void run(const Args &args, const RequesterOptions &opt)
{
    if (opt.fail_at > opt.count)
        throw UsageError("--fail-at " + std::to_string(opt.fail_at) + " is past --count " + std::to_string(opt.count),
                         "choose a WRITE from 1 to --count, or 0 for none");
    const std::string peer = "the responder (rdma_recovery_responder)";

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, false,
                             "this lesson moves its QP by hand (ERR -> RESET -> RTS), which iWARP leaves "
                             "to its CM: on iWARP a connection is made again with a new cm_id");
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register %d source slots of %zu bytes (no access flags: the device only reads them)", opt.count,
         slot_size);
    Buffer buf = source_slots(opt.count); // slot i holds "write #i"
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), 0), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0); // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get());

    step(4, "publish our connection descriptor, wait for the responder's answer and its slots, move the QP to RTS");
    Exchange exchange = connect_to_responder(
        {.args = args, .dev = dev, .pd = pd.get(), .qp = qp.get(), .completions = completions, .peer = peer},
        ResourceKind::mmap);
    const ResourceDescriptor remote = exchange.resource;
    if (remote.length < static_cast<std::uint32_t>(opt.count) * slot_size || !(remote.access & IBV_ACCESS_REMOTE_WRITE))
        throw Error("the responder exports " + std::to_string(remote.length) + " bytes, access " +
                        access_to_string(remote.access) + ": not " + std::to_string(opt.count) + " writable slots",
                    "run rdma_recovery_responder on the other side, or a smaller --count");

    //! [post]
    // Post @p writes at once, each into its own slot, each signaled: every completion says what became of
    // its WRITE. One ibv_post_send() takes them all, a chain linked by `next`: the device holds every one
    // before it sends the first. WRITE #wrong_rkey_at, if any, carries a key the responder never handed out.
    auto post_writes = [&](const std::vector<int> &writes, std::optional<int> wrong_rkey_at) {
        std::vector<ibv_sge> sges(writes.size());
        std::vector<ibv_send_wr> wrs(writes.size());
        for (std::size_t n = 0; n < writes.size(); ++n) {
            const int i = writes[n];
            sges[n] = {.addr = reinterpret_cast<std::uintptr_t>(buf.data() + (i - 1) * slot_size),
                       .length = static_cast<std::uint32_t>(slot_text(i).size()),
                       .lkey = mr->lkey};
            ibv_send_wr &wr = wrs[n];
            wr.wr_id = static_cast<std::uint64_t>(i);
            wr.next = n + 1 < writes.size() ? &wrs[n + 1] : nullptr; // the chain
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.sg_list = &sges[n];
            wr.num_sge = 1;
            wr.send_flags = IBV_SEND_SIGNALED; // signal every one: each completion says what became of it
            wr.wr.rdma.remote_addr = remote.addr + static_cast<std::uint64_t>(i - 1) * slot_size;
            wr.wr.rdma.rkey = remote.rkey;
            if (i == wrong_rkey_at) {
                wr.wr.rdma.rkey = remote.rkey ^ 0xff; // (demonstration) a key the responder never handed out
                info("WRITE #%d carries the wrong rkey 0x%x", i, wr.wr.rdma.rkey);
            }
        }
        ibv_send_wr *bad_wr = nullptr; // on failure: the first not posted (it and those after it were not)
        const int rc = ibv_post_send(qp.get(), wrs.data(), &bad_wr);
        check_post(rc, "ibv_post_send(RDMA_WRITE #" + std::to_string(bad_wr ? bad_wr->wr_id : wrs[0].wr_id) + ")");
    };
    //! [post]
    //! [drain]
    // One completion per signaled request, in the order they were posted (one send queue). After the
    // first failure the QP is in ERR: everything behind it is flushed, never sent. A flushed WRITE may or
    // may not have reached the peer's memory (IBTA): only a success says it did. What did not complete
    // successfully is returned, to be posted again.
    auto drain = [&](const std::vector<int> &writes) {
        std::vector<int> failed;
        for (int i : writes) {
            const ibv_wc wc = completions.poll_for(static_cast<std::uint64_t>(i), args.timeout_s,
                                                   "the completion of WRITE #" + std::to_string(i));
            result("WRITE #%d: %s (%s)", i, wc_status_name(wc.status), ibv_wc_status_str(wc.status));
            if (wc.status != IBV_WC_SUCCESS)
                failed.push_back(i);
        }
        return failed;
    };
    //! [drain]

    std::vector<int> writes(static_cast<std::size_t>(opt.count));
    std::iota(writes.begin(), writes.end(), 1); // WRITE #i into slot i
    step(5, "post %zu RDMA WRITE(s) at once to 0x%llx, rkey 0x%x", writes.size(),
         static_cast<unsigned long long>(remote.addr), remote.rkey);
    post_writes(writes, opt.fail_at != 0 ? std::optional<int>(opt.fail_at) : std::nullopt); // the fault

    step(6, "drain the completion queue: every WRITE completes, done, failed or flushed");
    const std::vector<int> failed = drain(writes); // the error, and the flushes behind it
    if (!failed.empty()) {                         // (with --fail-at 0 nothing failed: nothing to recover)
        step(7, "our QP is in the error state: take it ERR -> RESET -> INIT");
        //! [reset]
        ibv_qp_attr attr{};
        ibv_qp_init_attr init_attr{};
        check_rc(ibv_query_qp(qp.get(), &attr, IBV_QP_STATE, &init_attr), "ibv_query_qp(STATE)");
        info("QP 0x%06x is in state %s; the device's async events: %s", qp->qp_num, qp_state_name(attr.qp_state),
             async_events_or_none(dev.ctx.get()).c_str());
        if (opt.err_to_rts) { // (demonstration) the shortcut the IBTA does not allow
            attr = {};
            attr.qp_state = IBV_QPS_RTS;
            const int rc = ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE);
            info("ibv_modify_qp(ERR -> RTS): %s",
                 rc == 0 ? "accepted (this device goes beyond the IBTA)" : std::strerror(rc > 0 ? rc : errno));
        }
        // RESET forgets everything the QP knew about its peer (QPN, PSNs, path) and every request still
        // queued, without a completion: that is why the CQ was drained first. The QP keeps its number.
        attr = {};
        attr.qp_state = IBV_QPS_RESET;
        check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE), "ibv_modify_qp(RESET)");
        qp_to_init(qp.get(), dev, 0);
        //! [reset]

        step(8, "agree new PSNs: publish a new descriptor, wait for the responder's answer, move RTR -> RTS");
        //! [reconnect]
        // A fresh PSN, so that a packet of the old connection still on the wire cannot pass for a new
        // one. The descriptor answers the responder's last nonce: the responder takes no stale file.
        const std::uint32_t psn = random_psn();
        ConnectionDescriptor local = describe_qp(qp.get(), dev, psn, new_nonce());
        local.peer_nonce = remote.nonce;
        write_descriptor_file(args.local_descriptor_path, format_descriptor(local));
        info("wrote %s: QPN 0x%06x, new PSN 0x%06x", args.local_descriptor_path.c_str(), local.qp_num, psn);
        const ConnectionDescriptor answer = wait_with_hint(
            {.path = args.remote_descriptor_path, .from = peer, .timeout_s = args.timeout_s, .answering = local.nonce},
            "the responder never answered our new descriptor: is it still running? (killed, or its QP did not "
            "fail and it still waits for the goodbye; its output says which)");
        info("peer: QPN 0x%06x, new PSN 0x%06x", answer.qp_num, answer.psn);
        qp_to_rtr(qp.get(), dev, answer);
        qp_to_rts(qp.get(), psn);
        //! [reconnect]

        step(5, "post %zu RDMA WRITE(s) at once to 0x%llx, rkey 0x%x", failed.size(),
             static_cast<unsigned long long>(remote.addr), remote.rkey);
        post_writes(failed, std::nullopt); // the retry: the fault was once, every key is right now
        step(6, "drain the completion queue: every WRITE completes, done, failed or flushed");
        if (const std::vector<int> still = drain(failed); !still.empty())
            throw Error(std::to_string(still.size()) + " WRITE(s) still failed after the recovery",
                        "the statuses above say why; a peer that refuses the retry is not coming back");
    }
    result("Requester has written %d WRITE(s), every one completed successfully", opt.count);

    step(9, "say goodbye with a zero-length SEND: on RC it arrives after the WRITEs");
    say_goodbye(qp.get(), completions, args.timeout_s);
}

} // namespace
} // namespace rdma_recovery

int main(int argc, char **argv)
{
    rdma_recovery::RequesterOptions opt;
    const ProgramSpec spec = rdma_recovery::requester_spec(opt);
    return run_sample(spec, argc, argv, [&](const Args &args) { rdma_recovery::run(args, opt); });
}
