/**
 * @file responder.cpp
 * @brief Recovery, responder side: export slots, see our QP fail, bring it back with the requester.
 *
 * A responder takes no part in a WRITE, so how does it learn that its QP failed? Its device refused
 * the requester's WRITE (a wrong rkey) and moved our QP to ERR, and a QP in ERR flushes every receive
 * still posted: the goodbye's receive completes with IBV_WC_WR_FLUSH_ERR instead of the goodbye. Then,
 * as the requester does: ERR -> RESET -> INIT, the receive posted again (RESET threw it away), new PSNs
 * agreed, RTR -> RTS. The memory is printed before the recovery and at the end.
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

using namespace rdma_samples;

namespace rdma_recovery {
namespace {

void run(const Args &args)
{
    const std::string peer = "the requester (rdma_recovery_requester)";

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, false,
                             "this lesson moves its QP by hand (ERR -> RESET -> RTS), which iWARP leaves "
                             "to its CM: on iWARP a connection is made again with a new cm_id");
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register %d slots of %zu bytes the requester may write into (local write + remote write)", max_slots,
         slot_size);
    Buffer buf(max_slots * slot_size);                                   // zero-filled: an empty slot prints as (empty)
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE; // no remote read: nothing is read back
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair that accepts remote writes, and move it to INIT");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE);
    Completions completions(cq.get());

    step(4, "post a receive for the requester's goodbye before anyone can send it");
    post_goodbye_receive(qp.get(), mr.get());

    step(5, "wait for the requester's descriptor, move the QP to RTR and RTS, export the slots");
    ResourceDescriptor exported = describe_export(mr.get(), access);
    Exchange exchange = accept_requester(
        {.args = args, .dev = dev, .pd = pd.get(), .qp = qp.get(), .completions = completions, .peer = peer},
        &exported);

    step(6, "wait for the goodbye; a flush of its receive instead means our QP failed");
    //! [flushed]
    const ibv_wc wc = completions.poll_for(goodbye_wr_id, args.timeout_s, "the requester's goodbye");
    if (wc.status != IBV_WC_SUCCESS) { // (with the requester's --fail-at 0 the goodbye comes: nothing failed)
        if (wc.status != IBV_WC_WR_FLUSH_ERR)
            completions.check(wc, IBV_WC_RECV, "the goodbye's receive"); // throws, with the hint
        ibv_qp_attr attr{};
        ibv_qp_init_attr init_attr{};
        check_rc(ibv_query_qp(qp.get(), &attr, IBV_QP_STATE, &init_attr), "ibv_query_qp(STATE)");
        info("the goodbye's receive: %s; QP 0x%06x is in state %s; the device's async events: %s",
             wc_status_name(wc.status), qp->qp_num, qp_state_name(attr.qp_state),
             async_events_or_none(dev.ctx.get()).c_str());
        //! [flushed]
        print_slots("Responder", buf.data(), "before the recovery");

        step(7, "take the QP ERR -> RESET -> INIT, and post the goodbye's receive again");
        //! [reset]
        // Every receive was flushed, and polled: nothing of the old connection is left in the CQ. RESET
        // clears the QP's queues; the receive the goodbye needs is posted again before we answer.
        attr = {};
        attr.qp_state = IBV_QPS_RESET;
        check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE), "ibv_modify_qp(RESET)");
        qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE); // the access is granted again, from nothing
        post_goodbye_receive(qp.get(), mr.get());
        //! [reset]

        step(8, "wait for the requester's new descriptor, move the QP to RTR and RTS, answer with our new PSN");
        //! [reconnect]
        // Only a descriptor that answers our last one will do: the requester's file of the first
        // connection, or of an earlier run, is not taken for the new one.
        const ConnectionDescriptor remote = wait_with_hint(
            {.path = args.remote_descriptor_path,
             .from = peer,
             .timeout_s = args.timeout_s,
             .answering = exported.nonce},
            "the requester never sent its new descriptor: is it still running? (killed, or it gave up; its "
            "output says which)");
        info("peer: QPN 0x%06x, new PSN 0x%06x", remote.qp_num, remote.psn);
        const std::uint32_t psn = random_psn();
        qp_to_rtr(qp.get(), dev, remote);
        qp_to_rts(qp.get(), psn);
        // Answered only now, at RTR: the WRITEs the requester posts again find a QP that accepts them.
        ConnectionDescriptor local = describe_qp(qp.get(), dev, psn, new_nonce());
        local.peer_nonce = remote.nonce;
        write_descriptor_file(args.local_descriptor_path, format_descriptor(local));
        info("wrote %s: QPN 0x%06x, new PSN 0x%06x", args.local_descriptor_path.c_str(), local.qp_num, psn);
        //! [reconnect]

        step(6, "wait for the goodbye; a flush of its receive instead means our QP failed");
        // The retry: the requester posts again what failed, then its goodbye; a second failure is final.
        completions.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s, "the requester's goodbye");
    }

    step(9, "the goodbye arrived: every WRITE before it is in our memory");
    print_slots("Responder", buf.data(), "at the end");
    close_as_responder(exchange, args.timeout_s);
}

} // namespace
} // namespace rdma_recovery

int main(int argc, char **argv)
{
    return run_sample(rdma_recovery::responder_spec(), argc, argv, rdma_recovery::run);
}
