/**
 * @file sender.cpp
 * @brief UD SEND, sender side: numbered datagrams to a queue pair we never connect to.
 *
 * Every SEND names its destination (an address handle, the QPN, the Q_Key it accepts); no ACK, no
 * retry: a SEND's completion says only that our device is done with it. A message must fit in one
 * packet (the MTU), and UD carries SENDs only. Chapter 12, "Unreliable datagrams", explains each step.
 */
#include "ud.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_ud.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cstring>

using namespace rdma_samples;
using namespace rdma_ud;

/** Where the datagrams go: what ibv_create_ah() and every SEND's wr.ud need. */
struct Destination {
    ibv_ah_attr ah_attr{};
    std::uint32_t qp_num = 0, qkey = 0;
    int mtu = 0; ///< the largest payload one datagram can carry
};

static void run(const Args &args, const SenderOptions &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_ud(dev); // iWARP is connected only: no UD QPs
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    const int port_mtu = show_device(dev);

    step(2, "register %d message slots of %d bytes (no access flags: the device only reads a SEND's source)", opt.iters,
         port_mtu + 1);
    const std::size_t slot = static_cast<std::size_t>(port_mtu) + 1; // one byte more, for --over-mtu
    Buffer buf(slot * static_cast<std::size_t>(opt.iters));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), 0), "ibv_reg_mr"));

    step(3, "create a completion queue and a UD queue pair, and move the QP INIT -> RTR -> RTS");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), opt.iters, nullptr, nullptr, 0), "ibv_create_cq"));
    //! [create_ud_qp]
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq.get();
    init.qp_type = IBV_QPT_UD; // unreliable datagram: no peer, no ACKs, one packet per message
    init.cap.max_send_wr = static_cast<std::uint32_t>(opt.iters);
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    QpPtr qp(check(ibv_create_qp(pd.get(), &init), "ibv_create_qp(UD)"));
    //! [create_ud_qp]
    //! [ud_state_walk]
    // INIT: the port, the partition and the Q_Key: a datagram reaches this QP only if it carries this
    // Q_Key. (We send only; the receiver's Q_Key is the one that matters, and our SENDs carry it.)
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = dev.port;
    attr.qkey = 0x11111111;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
             "ibv_modify_qp(INIT)");
    // RTR: nothing to learn. An RC QP needs its one peer's QPN, PSN and GID here; a UD QP has no peer.
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE), "ibv_modify_qp(RTR)");
    // RTS: only our first PSN. Nobody checks it (no ACKs), but the packets carry it.
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = random_psn();
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
    //! [ud_state_walk]
    Completions completions(cq.get());
    info("QPN 0x%06x, state RTS, before we know anything about the receiver", qp->qp_num);

    Destination dst;
    CmUdPeer cm_peer;
    if (args.use_cm) {
        step(4, "ask RDMA CM (RDMA_PS_UDP) for the receiver's QPN, Q_Key and address vector");
        cm_peer = cm_ud_connect(args.cm_server(), args.timeout_s, dev, qp.get());
        dst = {cm_peer.ah_attr, cm_peer.qp_num, cm_peer.qkey, port_mtu};
    } else {
        step(4, "publish our UD descriptor and wait for the receiver's (QPN, Q_Key, GID, MTU)");
        const UdDescriptor ours =
            publish_descriptor(args.local_descriptor_path, dev, qp.get(), attr.qkey, port_mtu, {});
        const UdDescriptor receiver = wait_for_ud_descriptor(
            {args.remote_descriptor_path, "the receiver (rdma_ud_receive)", args.timeout_s, ours.nonce});
        info("receiver: QPN 0x%06x, Q_Key 0x%08x, GID %s, MTU %d", receiver.qp_num, receiver.qkey,
             gid_to_string(receiver.gid).c_str(), receiver.mtu);
        //! [ah_attr]
        // The address vector: on RoCE every packet carries an IP (GRH) header, so the address is a GID
        // (is_global = 1) and the LID is 0; on InfiniBand the LID routes within the subnet.
        dst.ah_attr.is_global = 1;
        dst.ah_attr.grh.dgid = receiver.gid;
        dst.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(dev.gid_index);
        dst.ah_attr.grh.hop_limit = 64;
        dst.ah_attr.dlid = receiver.lid;
        dst.ah_attr.port_num = dev.port;
        //! [ah_attr]
        dst.qp_num = receiver.qp_num;
        dst.qkey = receiver.qkey;
        dst.mtu = std::min(port_mtu, receiver.mtu);
    }

    step(5, "create an address handle for GID %s", gid_to_string(dst.ah_attr.grh.dgid).c_str());
    //! [create_ah]
    AhPtr ah(
        check(ibv_create_ah(pd.get(), &dst.ah_attr), "ibv_create_ah(" + gid_to_string(dst.ah_attr.grh.dgid) + ")"));
    //! [create_ah]
    if (opt.qkey) {
        info("(demonstration) our SENDs carry Q_Key 0x%08x; the receiver accepts 0x%08x", *opt.qkey, dst.qkey);
        dst.qkey = *opt.qkey;
    }

    // --op posts one RDMA WRITE or READ instead, which UD refuses (chapter 12, "What UD drops, and what it refuses").
    const std::string refused = opt.refused == IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE";
    const int datagrams = opt.refused ? 1 : opt.iters;
    const auto post_hint = [&](int err) { return opt.refused ? sends_only : hint_for_errno("ibv_post_send", err); };
    if (opt.refused)
        step(6, "(demonstration) post an %s on the UD QP: UD carries SENDs only", refused.c_str());
    else
        step(6, "post %d SENDs of \"#i/%d %s\" to QPN 0x%06x", opt.iters, opt.iters, args.message.c_str(), dst.qp_num);
    for (int i = 1; i <= datagrams; ++i) {
        char *msg = buf.data() + slot * static_cast<std::size_t>(i - 1);
        std::size_t len = format_datagram(msg, slot, i, opt.iters, args.message);
        if (i == 1 && opt.over_mtu) { // pad #1 to one byte above the MTU
            std::memset(msg + len, '.', slot - len);
            len = static_cast<std::size_t>(dst.mtu) + 1;
            info("(demonstration) datagram #1 is %zu bytes, one above the MTU of %d", len, dst.mtu);
        } else if (len > static_cast<std::size_t>(dst.mtu)) {
            throw Error(
                "datagram #" + std::to_string(i) + " is " + std::to_string(len) + " bytes, above the MTU of " +
                    std::to_string(dst.mtu) + " bytes",
                "a UD message must fit in one packet; shorten -s, or use RC (rdma_send), which splits messages");
        }
        const std::string call =
            "ibv_post_send(" + (opt.refused ? refused + " on a UD QP" : "UD SEND #" + std::to_string(i)) + ")";
        //! [post_ud_send]
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(msg), static_cast<std::uint32_t>(len), mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(i);
        wr.opcode = opt.refused.value_or(IBV_WR_SEND); // SEND: the only operation UD carries
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah.get();           // where: the receiver's port and GID
        wr.wr.ud.remote_qpn = dst.qp_num; // which QP there
        wr.wr.ud.remote_qkey = dst.qkey;  // the key it accepts; a wrong one and the datagram is dropped
        ibv_send_wr *bad_wr = nullptr;
        check_post(ibv_post_send(qp.get(), &wr, &bad_wr), call, post_hint);
        //! [post_ud_send]
    }
    if (opt.refused) // the device judges it when it executes it: still step 6
        expect_refusal(completions, refused, args.timeout_s);

    step(7, "poll the completion queue for each SEND, by wr_id");
    // Success means our device has sent the datagram (or, above the MTU, dropped it: IBTA C10-93.1.1
    // says it sends nothing and reports no error). Nobody acknowledges a datagram.
    for (int i = 1; i <= opt.iters; ++i) {
        const ibv_wc wc = completions.poll_for(static_cast<std::uint64_t>(i), args.timeout_s,
                                               "the completion of SEND #" + std::to_string(i));
        if (i == 1 && opt.over_mtu && wc.status != IBV_WC_SUCCESS) { // a device that reports it anyway
            info("SEND #1 (above the MTU) completed with %s", wc_status_name(wc.status));
            continue;
        }
        completions.check(wc, IBV_WC_SEND, "SEND #" + std::to_string(i));
        info("SEND #%d completed: %s", i, wc_status_name(wc.status));
    }
    result("Sender has sent %d datagrams to QPN 0x%06x (no acknowledgement: only the receiver knows what arrived)",
           opt.iters, dst.qp_num);
}

int main(int argc, char **argv)
{
    SenderOptions opt;
    return run_sample(sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
