/**
 * @file receiver.cpp
 * @brief UD RECEIVE, receiver side: post receives, then take numbered datagrams from whoever sends.
 *
 * Each receive buffer starts with 40 bytes for the packet's network header; the payload follows, and
 * wc.byte_len counts both. The completion names the sending QP (wc.src_qp), the header its GID.
 * Nothing is acknowledged or retried: a datagram with a wrong Q_Key, above the MTU, or that finds no
 * receive is dropped without a word, so the datagrams are numbered and this side reports which never
 * came. Chapter 12, "Unreliable datagrams", explains each step.
 */
#include "ud.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_ud.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <chrono>
#include <cstring>
#include <thread>

using namespace rdma_samples;
using namespace rdma_ud;

/**
 * The sender's GID, from the 40 bytes before the payload. On InfiniBand, RoCE v1 and RoCE v2 over
 * IPv6 they hold a GRH or the IPv6 header (same layout: version 6 in the first 4 bits, source GID at
 * byte 8). On RoCE v2 over IPv4 the first 20 bytes are undefined and the IPv4 header fills the last
 * 20 (source address at byte 32): the GID is then ::ffff:a.b.c.d. The undefined bytes may read as
 * version 6 on a NIC: then the IPv4 header's checksum decides, as in rdma-core's ibv_init_ah_from_wc().
 */
static ibv_gid sender_gid(const char *header)
{
    //! [read_grh]
    ibv_gid gid{};
    const auto *b = reinterpret_cast<const std::uint8_t *>(header);
    const bool ipv4 = (b[0] >> 4) != 6 ? b[20] == 0x45 : roce_ipv4_header(b + 20);
    if (ipv4) {
        gid.raw[10] = gid.raw[11] = 0xff;
        std::memcpy(&gid.raw[12], b + 32, 4);
    } else {
        std::memcpy(gid.raw, b + offsetof(ibv_grh, sgid), sizeof gid.raw);
    }
    //! [read_grh]
    return gid;
}

static void run(const Args &args, const ReceiverOptions &opt)
{
    const int receives = opt.receives > 0 ? opt.receives : opt.iters;
    const std::uint32_t qkey = args.use_cm ? RDMA_UDP_QKEY : opt.qkey; // the CM's UDP port space fixes it
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_ud(dev); // iWARP is connected only: no UD QPs
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    const int mtu = show_device(dev);

    step(2, "register %d receive slots of 40 + %d bytes (local write: the device writes into them)", receives, mtu);
    const std::size_t slot = grh_bytes + static_cast<std::size_t>(mtu);
    Buffer buf(slot * static_cast<std::size_t>(receives));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion queue and a UD queue pair with Q_Key 0x%08x; INIT -> RTR", qkey);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), receives, nullptr, nullptr, 0), "ibv_create_cq"));
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq.get();
    init.qp_type = IBV_QPT_UD;
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = static_cast<std::uint32_t>(receives);
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    QpPtr qp(check(ibv_create_qp(pd.get(), &init), "ibv_create_qp(UD)"));
    // The walk of sender.cpp, without RTS: a QP that only receives may stay at RTR.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = dev.port;
    attr.qkey = qkey; // our device drops every datagram that carries another Q_Key
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
             "ibv_modify_qp(INIT)");
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE), "ibv_modify_qp(RTR)");
    info("QPN 0x%06x, state RTR", qp->qp_num);

    step(4, "post %d receives of %zu bytes (40 for the header + the MTU)%s", receives, slot,
         receives < opt.iters ? " (demonstration: fewer than the datagrams)" : "");
    for (int i = 0; i < receives; ++i) {
        //! [post_ud_recv]
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data() + slot * static_cast<std::size_t>(i)),
                    static_cast<std::uint32_t>(slot), mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(i); // the slot
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_post(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv");
        //! [post_ud_recv]
    }

    CmConnection cm;
    if (args.use_cm) {
        step(5, "answer the sender's RDMA CM lookup (RDMA_PS_UDP) with our QPN");
        cm = cm_ud_accept(args.listen_port, args.timeout_s, dev, qp.get());
    } else {
        step(5, "wait for the sender's UD descriptor, then publish ours (QPN, Q_Key, GID, MTU)");
        const UdDescriptor sender = wait_for_ud_descriptor(
            {args.remote_descriptor_path, "the sender (rdma_ud_send)", args.timeout_s, std::nullopt});
        info("sender: QPN 0x%06x, GID %s", sender.qp_num, gid_to_string(sender.gid).c_str());
        publish_descriptor(args.local_descriptor_path, dev, qp.get(), qkey, mtu, sender.nonce);
    }

    step(6, "poll the completion queue: each completion's wr_id is the slot its datagram filled");
    // The sender numbers its datagrams #i/N. We stop when all N came, when every receive is used (no
    // datagram can arrive after that), or a second after the last one (a straggler may still come).
    Tally tally;
    int completions = 0;
    Deadline deadline(args.timeout_s);
    std::optional<Deadline> grace;
    while (completions < receives && !tally.all_came() && !deadline.expired() && !(grace && grace->expired())) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 0) {
            // Our lookup reply is a datagram too, and may be lost: the sender's CM then asks again.
            if (args.use_cm && cm_ud_answer_again(cm, qp.get()) > 0)
                info("RDMA CM: answered a repeated lookup (our reply was lost, or another sender asks)");
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        ++completions;
        check_wc(wc, IBV_WC_RECV, "a datagram's receive");
        //! [ud_completion]
        const char *header = buf.data() + slot * wc.wr_id;
        const std::string payload = ud_payload(header, slot, wc); // byte_len counts the 40: what follows them
        info("datagram of %u bytes (40 + %zu) from QPN 0x%06x, GID %s%s", wc.byte_len, payload.size(), wc.src_qp,
             gid_to_string(sender_gid(header)).c_str(), (wc.wc_flags & IBV_WC_GRH) ? "" : " (no GRH flag!)");
        //! [ud_completion]
        if (completions == 1) {
            info("the 40 bytes before its payload, as the device wrote them (the first datagram only):");
            show_header(header);
        }
        const std::optional<Numbered> d = parse_datagram(payload);
        if (!d) {
            info("not a numbered datagram: ignored");
            continue;
        }
        // The sender's text, quoted: control bytes escaped, so no datagram drives the terminal.
        result("Got #%d/%d from sender: %s%s", d->seq, d->count, quote(d->text, max_message_length).c_str(),
               tally.note(*d));
        if (d->seq == d->count && !grace)
            grace = Deadline::in_ms(std::min(1000, deadline.left_ms()));
    }
    if (tally.received == 0)
        throw timeout_error(args.timeout_s, "a datagram from the sender",
                            "nothing arrived, and UD never says why: our device drops a datagram whose Q_Key is not "
                            "ours (" +
                                hex(qkey, 8) +
                                "), one above the MTU, or one that finds no receive; "
                                "check the sender's --qkey and that it runs");

    step(7, "report the datagrams that never came");
    const std::string lost = tally.lost();
    const int total = tally.total;
    result("Received %d of %d datagrams%s%s", tally.received, total, lost.empty() ? "" : "; lost:", lost.c_str());
    if (!lost.empty())
        throw Error(
            std::to_string(total - tally.received) + " of " + std::to_string(total) +
                " datagrams never arrived:" + lost,
            completions == receives && receives < total
                ? "only " + std::to_string(receives) +
                      " receive(s) were posted: a datagram that finds none is dropped, and the sender's completion still says success (UD has no RNR NAK)"
                : "UD does not retransmit: a datagram above the MTU, with a wrong Q_Key or lost on the network is gone; number them, as here, to notice");
}

int main(int argc, char **argv)
{
    ReceiverOptions opt;
    return run_sample(receiver_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
