/**
 * @file receiver.cpp
 * @brief Multicast, receiver side: join a group, attach a UD queue pair to it, take its datagrams.
 *
 * Joining (RDMA CM) tells the network to deliver the group here; attaching (ibv_attach_mcast) tells our
 * device which QP gets a copy. Any number of receivers can do the same, on one device or many: each
 * gets its own copy of every datagram that reaches it, and nothing is resent, so the datagrams are
 * numbered and each receiver reports which never came. Chapter 20, "Multicast", explains each step.
 */
#include "multicast.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/datagrams.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <chrono>
#include <optional>
#include <thread>

using namespace rdma_samples;
using namespace rdma_multicast;

namespace {

void run(const Args &args, const Options &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_ud(dev); // multicast is UD: iWARP has none
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    const int mtu = show_device(dev);

    step(2, "register %d receive slots of 40 + %d bytes (local write: the device writes into them)", opt.iters, mtu);
    const std::size_t slot = grh_bytes + static_cast<std::size_t>(mtu);
    Buffer buf(slot * static_cast<std::size_t>(opt.iters));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "join group %s through RDMA CM as a full member", opt.group.c_str());
    Group group = join_group(dev, opt.group, false, args.timeout_s);

    step(4, "create a completion queue and a UD queue pair with the group's Q_Key, post %d receives", opt.iters);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), opt.iters, nullptr, nullptr, 0), "ibv_create_cq"));
    const auto receives = static_cast<std::uint32_t>(opt.iters);
    QpPtr qp = create_ud_qp(pd.get(), cq.get(), dev, {.max_send_wr = 1, .max_recv_wr = receives}, group.qkey);
    post_slot_receives(qp.get(), buf.data(), slot, opt.iters, mr->lkey, 0, "ibv_post_recv"); // wr_id: the slot

    step(5, "attach the queue pair to the group");
    std::optional<Attachment> attached(std::in_place, qp.get(), group.ah_attr);
    info("QPN 0x%06x attached to %s; waiting up to %d s for the sender's datagrams", qp->qp_num, opt.group.c_str(),
         args.timeout_s);

    step(6, "poll the completion queue: every datagram to the group is a copy for us");
    // Stop when all N came, when every receive is used, or a second after the last number.
    Tally tally;
    int completions = 0;
    const Deadline deadline(args.timeout_s);
    std::optional<Deadline> grace;
    while (completions < opt.iters && !tally.all_came() && !deadline.expired() && !(grace && grace->expired())) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        ++completions;
        check_wc(wc, IBV_WC_RECV, "a datagram's receive");
        const std::string payload = ud_payload(buf.data() + slot * wc.wr_id, slot, wc); // (wr_id: a slot we posted)
        const std::optional<Numbered> d = parse_datagram(payload);
        if (!d) { // another program's (mckey's, say): counted, not numbered
            result("Got a datagram of %zu bytes from QPN 0x%06x, not a numbered one", payload.size(), wc.src_qp);
            continue;
        }
        // Anyone on the network may send to the group: its text is printed quoted, control bytes escaped.
        result("Got #%d/%d from QPN 0x%06x: %s%s", d->seq, d->count, wc.src_qp,
               quote(d->text, max_message_length).c_str(), tally.note(*d));
        if (d->seq == d->count && !grace)
            grace = Deadline::in_ms(std::min(1000, deadline.left_ms()));
    }

    if (completions == 0) // (the attachment and the membership end as this returns: RAII)
        throw timeout_error(args.timeout_s, "a datagram to group " + opt.group,
                            "is the sender running with the same --group, on the same network, after this receiver "
                            "printed \"attached\"? a datagram sent before the attach is not ours");

    step(7, "detach the queue pair and leave the group");
    attached.reset();
    leave_group(group);
    if (tally.received == 0) {
        result("Received %d datagram(s), none numbered", completions);
        return;
    }
    const std::string lost = tally.lost();
    result("Received %d of %d datagrams%s%s", tally.received, tally.total, lost.empty() ? "" : "; lost:", lost.c_str());
    if (!lost.empty())
        throw Error(std::to_string(tally.total - tally.received) + " of " + std::to_string(tally.total) +
                        " datagrams never arrived:" + lost,
                    "multicast is UD: nothing is resent; a datagram that finds no receive, or is lost on the "
                    "network, is gone");
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    return run_sample(receiver_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
