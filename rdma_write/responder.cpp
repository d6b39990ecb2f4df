/**
 * @file responder.cpp
 * @brief RDMA WRITE, responder side: export a buffer, let the requester write into it, read the result.
 *
 * The responder grants the requester remote write on one buffer and hands out that buffer's address
 * and rkey. Its CPU takes no part in the WRITE: it only waits for the requester's goodbye, a zero-length
 * SEND that, on a Reliable Connected QP, cannot overtake the WRITE posted before it. The goodbye's
 * receive, the poll loop and the end of the connection are written out here; the QP transitions are
 * written out in requester.cpp, and here they are the rc_qp.hpp helpers.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <chrono>
#include <cstring>
#include <thread>

using namespace rdma_samples;

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte buffer the requester may write into (local read/write + remote write)",
         max_message_length);
    Buffer buf(max_message_length);
    //! [reg_mr]
    // DOCA's table: the responder's mmap is local read/write + remote write. Remote write also needs
    // local write (the device writes into our memory on the peer's behalf). No remote read: the peer
    // cannot read anything back through this rkey.
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    //! [reg_mr]
    info("addr %p, length %zu, rkey 0x%x", buf.data(), buf.size(), mr->rkey);

    step(3, "create a completion queue and an RC queue pair that accepts remote writes, and move it to INIT");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests, as in requester.cpp.
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    // The QP must allow remote write too: the MR and the QP each have to grant it.
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE);
    Completions completions(cq.get()); // our poll loop finds each completion by its wr_id
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post a receive for the requester's goodbye before anyone can send it");
    //! [goodbye_receive]
    // A SEND that finds no receive is refused (Receiver Not Ready). Posted now, before we publish
    // anything, this one is surely there. The goodbye carries no data, so its one scatter/gather
    // entry has length 0: nothing can land anywhere. (Zero entries would do on Soft-RoCE, but
    // Soft-iWARP's user-space provider refuses a receive without one, with EINVAL.)
    ibv_sge none{};
    none.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    none.length = 0;
    none.lkey = mr->lkey;
    ibv_recv_wr bye{};
    bye.wr_id = goodbye_wr_id;
    bye.sg_list = &none;
    bye.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_recv(qp.get(), &bye, &bad_wr), "ibv_post_recv(goodbye)");
    //! [goodbye_receive]

    // What we export: exactly the registered range, remote write only. It reaches the requester in a
    // file (-m) or, with -cm, in a SEND over the new connection.
    ResourceDescriptor exported{};
    exported.kind = ResourceKind::mmap;
    exported.nonce = new_nonce();
    exported.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    exported.length = static_cast<std::uint32_t>(buf.size());
    exported.rkey = mr->rkey;
    exported.access = access;

    CmConnection cm; // -cm only: the RDMA CM connection, closed before the QP
    if (args.use_cm) {
        step(5, "wait for the requester to connect with RDMA CM (port %u); the CM moves the QP to RTR and RTS",
             args.listen_port);
        //! [cm_accept]
        // We are the server: listen, take the requester's connection request, apply the RTR/RTS attributes
        // the CM negotiated (see cm.hpp), accept. Our goodbye receive is already posted.
        cm = cm_accept(args.listen_port, args.timeout_s, dev, qp.get());
        //! [cm_accept]
        step(6, "export the buffer: SEND our mmap descriptor over the new connection");
        // The requester posted its receive for this before connecting, so the SEND finds it.
        send_descriptor(pd.get(), qp.get(), completions, format_descriptor(exported), args.timeout_s);
    } else {
        step(5, "wait for the requester's connection descriptor, then move the QP to RTR and RTS");
        const ConnectionDescriptor remote = wait_for_connection_descriptor(
            {args.remote_descriptor_path, "the requester (rdma_write_requester)", args.timeout_s, {}});
        info("peer: QPN 0x%06x, PSN 0x%06x, GID %s", remote.qp_num, remote.psn, gid_to_string(remote.gid).c_str());
        const std::uint32_t psn = random_psn();
        qp_to_rtr(qp.get(), dev, remote);
        qp_to_rts(qp.get(), psn);

        step(6, "export the buffer: write our mmap descriptor and connection descriptor");
        //! [export]
        // Only now, with the QP ready to receive, do we answer: whatever the requester posts after reading
        // these files finds a QP that accepts it. peer_nonce ties the answer to this requester.
        exported.peer_nonce = remote.nonce;
        write_descriptor_file(args.resource_descriptor_path, format_descriptor(exported));
        ConnectionDescriptor local = describe_qp(qp.get(), dev, psn, exported.nonce);
        local.peer_nonce = remote.nonce;
        write_descriptor_file(args.local_descriptor_path, format_descriptor(local));
        //! [export]
        info("wrote %s and %s", args.resource_descriptor_path.c_str(), args.local_descriptor_path.c_str());
    }

    step(7, "wait for the goodbye; the WRITE itself gives us no completion");
    //! [goodbye]
    // With -cm, the goodbye may complete before our descriptor SEND did (its ACK came late): that
    // wait kept the goodbye's completion, and this one finds it.
    completions.wait(goodbye_wr_id, IBV_WC_RECV, args.timeout_s,
                     "the requester's goodbye (a zero-length SEND after its WRITE)");
    //! [goodbye]

    step(8, "read what the requester wrote into our memory");
    const std::size_t len = strnlen(buf.data(), buf.size());
    result("Responder memory now holds: \"%.*s\"", static_cast<int>(len), buf.data());
    if (len == 0)
        throw Error("the goodbye arrived but the buffer is still empty",
                    "the requester wrote nothing (an empty -w?) or wrote elsewhere; check its output");

    step(9, args.use_cm ? "disconnect from the requester (RDMA CM)"
                        : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    //! [close]
    if (args.use_cm) {
        cm_disconnect(cm, args.timeout_s); // the requester answers our DREQ only after its last completion
    } else {
        // Like TCP's TIME_WAIT: if our ACK of the goodbye was lost, the requester resends the goodbye
        // for up to (retry_cnt + 1) ACK timeouts (IBTA; both sides set the same timers, so our QP tells
        // us the requester's), and only a QP that still exists can ACK it again. Destroy the QP now and
        // the requester, whose message did arrive, fails with IBV_WC_RETRY_EXC_ERR. A NIC may resend
        // later than the formula says (rc_qp.hpp); -cm's DREQ/DREP does not depend on timing.
        const int linger_ms = retransmit_window_ms(qp.get());
        info("keeping the QP %d ms, in case our last ACK was lost and the peer resends", linger_ms);
        std::this_thread::sleep_for(std::chrono::milliseconds(linger_ms));
    }
    //! [close]
} // qp, cq, mr, pd and the device close here: the exported rkey stops working

int main(int argc, char **argv)
{
    const ProgramSpec spec{
        .name = "rdma_write_responder",
        .role = "responder",
        .summary = "RDMA WRITE, responder side: export a buffer and print what the requester wrote into it.",
        .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
