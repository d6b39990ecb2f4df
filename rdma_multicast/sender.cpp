/**
 * @file sender.cpp
 * @brief Multicast, sender side: one SEND reaches every queue pair attached to a group.
 *
 * The sender joins the group through RDMA CM as a send-only full member, which gives it the group's
 * address vector, and then sends UD datagrams as to any UD peer (chapter 12), but to the group's QPN,
 * 0xFFFFFF: the network and the receiving devices copy each datagram to every member. It never learns
 * who they are; nothing is acknowledged. Chapter 20, "Multicast", explains each step.
 */
#include "multicast.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/datagrams.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <chrono>
#include <optional>
#include <thread>

using namespace rdma_samples;
using namespace rdma_multicast;

/** --loopback: our own QP attached to the group, with a receive for each datagram we send; count()
 *  says how many of our own datagrams the device handed back to it. */
class OwnCopies {
public:
    OwnCopies(ibv_pd *pd, ibv_qp *qp, const ibv_ah_attr &group, int iters, int mtu)
        : slot_(grh_bytes + static_cast<std::size_t>(mtu)), buf_(slot_ * static_cast<std::size_t>(iters)),
          mr_(check(ibv_reg_mr(pd, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr(own copies)")),
          attached_(qp, group), iters_(iters)
    {
        post_slot_receives(qp, buf_.data(), slot_, iters, mr_->lkey, first_wr_id, "ibv_post_recv(own copy)");
    }
    /** How many came back within two seconds of the last SEND's completion (receives complete in order;
     *  a copy takes far less, but an emulated machine under load may be slow to hand it back). */
    int count(Completions &completions, ibv_cq *cq)
    {
        int back = 0;
        ibv_wc wc{};
        // Completions' own poll loop (take, else poll and keep), bounded by the grace and not by -t.
        for (const Deadline grace = Deadline::in_ms(2000); back < iters_ && !grace.expired();) {
            if (completions.take(first_wr_id + static_cast<std::uint64_t>(back), wc)) {
                check_wc(wc, IBV_WC_RECV, "a copy of our own datagram");
                ++back;
            } else if (check_poll(ibv_poll_cq(cq, 1, &wc)) == 1) {
                completions.keep(wc);
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        return back;
    }

private:
    static constexpr std::uint64_t first_wr_id = 1000; ///< (the SENDs are 1 .. --iters)
    std::size_t slot_;
    Buffer buf_;
    MrPtr mr_;
    Attachment attached_;
    int iters_;
};

static void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_ud(dev); // multicast is UD: iWARP has none
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    const int mtu = show_device(dev);

    step(2, "register %d message slots of %d bytes (no access flags: the device only reads a SEND's source)", opt.iters,
         mtu);
    const auto slot = static_cast<std::size_t>(mtu);
    Buffer buf(slot * static_cast<std::size_t>(opt.iters));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), 0), "ibv_reg_mr"));

    step(3, "join group %s through RDMA CM as a send-only full member", opt.group.c_str());
    Group group = join_group(dev, opt.group, true, args.timeout_s);

    step(4, "create a completion queue and a UD queue pair (INIT -> RTR -> RTS, as in chapter 12)");
    const auto sends = static_cast<std::uint32_t>(opt.iters);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), 2 * opt.iters, nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_ud_qp(pd.get(), cq.get(), dev, {.max_send_wr = sends, .max_recv_wr = sends}, group.qkey,
                            opt.block_loopback ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB : 0);
    Completions completions(cq.get());
    std::optional<OwnCopies> own; // --loopback: our QP attached too, a receive for each of our datagrams
    if (opt.loopback)
        own.emplace(pd.get(), qp.get(), group.ah_attr, opt.iters, mtu);
    info("QPN 0x%06x, state RTS; %s", qp->qp_num,
         own ? "(demonstration) attached to the group too, a receive posted for each datagram"
             : "not attached to the group: a sender needs no receive from it");

    step(5, "create an address handle for the group (MGID %s)", gid_to_string(group.ah_attr.grh.dgid).c_str());
    //! [group_ah]
    // The join's address vector names the group as a destination GID; on RoCE v2 that is the group's
    // IP address, and the packet's Ethernet destination is the group's MAC.
    AhPtr ah(check(ibv_create_ah(pd.get(), &group.ah_attr),
                   "ibv_create_ah(MGID " + gid_to_string(group.ah_attr.grh.dgid) + ")"));
    //! [group_ah]

    step(6, "post %d SENDs of \"#i/%d %s\" to the group (QPN 0x%06x)", opt.iters, opt.iters, args.message.c_str(),
         group.qp_num);
    for (int i = 1; i <= opt.iters; ++i) {
        char *msg = buf.data() + slot * static_cast<std::size_t>(i - 1);
        const std::size_t len = format_datagram(msg, slot, i, opt.iters, args.message);
        if (len >= slot)
            throw Error("datagram #" + std::to_string(i) + " is " + std::to_string(len) + " bytes, the MTU is " +
                            std::to_string(mtu),
                        "a multicast datagram must fit in one packet: shorten -s");
        //! [post_mcast_send]
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(msg), static_cast<std::uint32_t>(len), mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(i);
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah.get();             // the group's address
        wr.wr.ud.remote_qpn = group.qp_num; // 0xFFFFFF: every QP attached to the group
        wr.wr.ud.remote_qkey = group.qkey;  // the Q_Key the members' QPs took from their join
        ibv_send_wr *bad_wr = nullptr;
        check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(multicast SEND #" + std::to_string(i) + ")");
        //! [post_mcast_send]
    }
    for (int i = 1; i <= opt.iters; ++i)
        completions.wait(static_cast<std::uint64_t>(i), IBV_WC_SEND, args.timeout_s,
                         "the completion of SEND #" + std::to_string(i));

    if (own) // (demonstration) what multicast loopback gave our own QP
        result("Our own QP got %d of its %d datagrams back%s", own->count(completions, cq.get()), opt.iters,
               opt.block_loopback ? " (created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)" : "");

    step(7, "leave the group");
    leave_group(group);
    result("Sender has sent %d datagrams to group %s (no acknowledgement: only the receivers know what arrived)",
           opt.iters, opt.group.c_str());
}

int main(int argc, char **argv)
{
    Options opt;
    return run_sample(sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
