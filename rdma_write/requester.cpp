/**
 * @file requester.cpp
 * @brief RDMA WRITE, requester side: put a string straight into the responder's memory.
 *
 * The first lesson. Every verbs call is written out, including the queue pair's walk from RESET to
 * INIT, RTR (ready to receive) and RTS (ready to send), and both ways to connect: descriptor files and
 * RDMA CM (`-cm`). Later lessons call rc_qp.hpp and exchange.hpp for what this one teaches. An RDMA
 * WRITE is "one-sided": the responder's CPU takes no part in it and sees no completion for it. It only
 * learns that the write is done from the goodbye SEND we post after it.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace rdma_samples;

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    //! [open_device]
    // Every verbs program starts here: list the RDMA devices the kernel knows (rxe0, mlx5_0, ...).
    int num_devices = 0;
    DeviceListPtr devices(ibv_get_device_list(&num_devices));
    require_devices(devices.get(), num_devices); // none: say how to create a Soft-RoCE one
    Device dev;                                  // what open_device() returns to every later lesson
    for (int i = 0; i < num_devices && !dev.ctx; ++i) {
        dev.name = ibv_get_device_name(devices.get()[i]);
        if (!args.device.empty() && dev.name != args.device)
            continue; // -d names another one
        dev.ctx.reset(check(ibv_open_device(devices.get()[i]), "ibv_open_device(" + dev.name + ")"));
        // The port: its state (ACTIVE once its network interface is up), its MTU, its link layer
        // (Ethernet for RoCE, InfiniBand) and the size of its GID table.
        check_rc(ibv_query_port(dev.ctx.get(), dev.port, &dev.port_attr), "ibv_query_port(" + dev.name + ", port 1)");
        if (!port_is_usable(dev, !args.device.empty()))
            dev.ctx.reset(); // not ACTIVE: without -d, try the next device
    }
    if (!dev.ctx)
        fail_no_usable_device(devices.get(), num_devices, args.device);
    // The device's limits: max_qp_wr, max_cqe, max_mr_size, max_qp_rd_atom, atomic_cap, ...
    check_rc(ibv_query_device(dev.ctx.get(), &dev.device_attr), "ibv_query_device");
    // Our address: the port's GID table holds one GID per IP address of its interface and RoCE
    // version (an empty entry fails the query). -g picks one; else the best: RoCE v2 and IPv4 first.
    std::vector<GidEntry> gids;
    for (int i = 0; i < dev.port_attr.gid_tbl_len; ++i) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(dev.ctx.get(), dev.port, static_cast<std::uint32_t>(i), &entry, 0) == 0)
            gids.push_back(to_gid_entry(i, entry));
    }
    dev.gid_index = pick_gid_index(gids, args.gid_index, dev);
    check_rc(ibv_query_gid(dev.ctx.get(), dev.port, dev.gid_index, &dev.gid), "ibv_query_gid");
    //! [open_device]
    // An iWARP device (transport_type IBV_TRANSPORT_IWARP: RDMA over TCP) connects only through RDMA CM,
    // never with descriptor files: said now, not after a wait (step 4 shows what its CM does).
    require_rdma_cm_on_iwarp(dev, args.use_cm);
    //! [alloc_pd]
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    //! [alloc_pd]
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register a buffer holding the %zu-byte string to write (local read/write, not exported)",
         args.message.size());
    Buffer buf(std::max<std::size_t>(args.message.size(), 1)); // what we send and no more (a region is never empty)
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    //! [reg_mr]
    // The device only READS a WRITE's source: verbs needs no flag for that (local read is always
    // granted), so ibv_reg_mr(..., 0) would do. IBV_ACCESS_LOCAL_WRITE is DOCA's choice (its table
    // gives the requester's mmap local read/write), kept so DOCA users see the same grants. Nobody
    // reaches this memory remotely: no IBV_ACCESS_REMOTE_* flag, its rkey opens nothing.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]
    info("addr %p, length %zu, lkey 0x%x", buf.data(), buf.size(), mr->lkey);

    step(3, "create a completion queue and an RC queue pair, and move the QP to INIT");
    //! [create_qp]
    // Room for every completion that can wait in it: 16 sends (signaled or not: a flushed one completes
    // too) + 16 receives. An overrun is an error.
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), 16 + 16, nullptr, nullptr, 0), "ibv_create_cq"));
    ibv_qp_init_attr init{};
    init.send_cq = cq.get();   // completions of our sends, writes and reads
    init.recv_cq = cq.get();   // completions of our receives (with -cm: the mmap descriptor)
    init.qp_type = IBV_QPT_RC; // Reliable Connected: acknowledged, in order, one peer
    init.sq_sig_all = 0;       // a send request completes only if posted with IBV_SEND_SIGNALED
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    QpPtr qp(check(ibv_create_qp(pd.get(), &init), "ibv_create_qp"));
    // RESET -> INIT, the first of three transitions (RTR and RTS need the peer: step 5 or the CM).
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = dev.port; // the physical port this QP sends from
    attr.pkey_index = 0;      // P_Key index 0: the port's first partition key, the default one
    attr.qp_access_flags = 0; // what the PEER may do through this QP: nothing, we only initiate
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
             "ibv_modify_qp(INIT)");
    //! [create_qp]
    Completions completions(cq.get()); // our poll loops find each completion by its wr_id (step 7)
    info("QPN 0x%06x, state INIT", qp->qp_num);

    ResourceDescriptor remote{}; // where the responder lets us write, from a file or in-band
    CmConnection cm;             // -cm only: the RDMA CM connection, closed before the QP
    if (args.use_cm) {
        step(4, "connect to the responder with RDMA CM (%s port %u); the CM moves the QP to RTR and RTS",
             args.server_addr.value_or("?").c_str(), args.listen_port);
        //! [cm_connect]
        // RDMA CM carries QPN, PSN and GID in its own handshake (cm.hpp). The responder SENDs its mmap
        // descriptor the moment it accepts, so our receive for it is posted first (a QP in INIT takes it).
        DescriptorReceive remote_text(pd.get(), qp.get());
        // Four calls, each answered by an event on the connection's channel. cm_retry() gives each try a
        // new cm_id and tries again while the server is not there yet, as a TCP client retries a refused
        // connect(), until -t runs out. (Later pairs make the same calls in one: cm_connect().)
        cm = cm_retry(args.cm_server(), args.timeout_s, qp.get(), [&](CmTry &this_try) {
            rdma_cm_id *id = this_try.conn.id.get();
            // 1. Address: which local device and port reach the server (like ARP plus a routing lookup).
            check_rc(rdma_resolve_addr(id, nullptr, this_try.dst, this_try.resolve_ms()),
                     "rdma_resolve_addr(" + this_try.conn.peer + ")", cm_addr_hint);
            if (!this_try.event(RDMA_CM_EVENT_ADDR_RESOLVED, "the address of " + this_try.conn.peer))
                return false;         // no answer yet: try again
            check_cm_device(id, dev); // the device that reaches it must be the one we opened
            // 2. Route: the path to it (on RoCE: the next hop's MAC, the GID to send from).
            check_rc(rdma_resolve_route(id, this_try.left_ms()), "rdma_resolve_route(" + this_try.conn.peer + ")",
                     cm_route_hint);
            if (!this_try.event(RDMA_CM_EVENT_ROUTE_RESOLVED, "a route to " + this_try.conn.peer))
                return false;
            this_try.say_route(); // on the first try: which device and port reach the server
            // 3. Connect: the CM sends our QPN and PSN in a REQ; the server's REP carries its own.
            rdma_conn_param param = cm_conn_param(qp.get()); // we READ nothing: no depth to ask for
            // (On iWARP, a server that is not listening yet refuses the TCP connect inside rdma_connect().)
            if (this_try.refused_at_once(rdma_connect(id, &param))) // check_rc() for any other failure
                return false;                                       // nobody listens yet: try again
            if (is_iwarp(dev)) {
                // iWARP (siw, E810, Chelsio): the connect is a TCP connection plus an MPA handshake, and the
                // kernel's iWARP CM moves our QP to RTS itself when they are done. No REP to answer and no
                // RTU: the first event is ESTABLISHED (rdma_init_qp_attr() would give nothing for RTS).
                return this_try.event(RDMA_CM_EVENT_ESTABLISHED, "the server to accept") != nullptr;
            }
            if (!this_try.event(RDMA_CM_EVENT_CONNECT_RESPONSE, "the server to accept"))
                return false; // nobody listens yet: try again
            // 4. The QP is ours, not the CM's: we take it to RTR and RTS with the attributes the CM agreed
            //    (cm_ready_qp(): rdma_init_qp_attr(), ibv_modify_qp()), then send the RTU, which makes the
            //    connection ESTABLISHED at the server.
            cm_ready_qp(id, qp.get());
            check_rc(rdma_establish(id), "rdma_establish");
            return true;
        });
        //! [cm_connect]
        step(5, "receive the responder's mmap descriptor, which it SENDs right after accepting");
        remote = parse_resource_descriptor(remote_text.wait(completions, args.timeout_s), "the responder's SEND",
                                           ResourceKind::mmap);
    } else {
        step(4, "publish our connection descriptor and wait for the responder's answer");
        //! [exchange]
        const std::uint32_t psn = random_psn();
        const ConnectionDescriptor local = describe_qp(qp.get(), dev, psn, new_nonce());
        write_descriptor_file(args.local_descriptor_path, format_descriptor(local));
        info("wrote %s: QPN 0x%06x, PSN 0x%06x, GID %s", args.local_descriptor_path.c_str(), local.qp_num, local.psn,
             gid_to_string(local.gid).c_str());
        // The responder answers once its QP is ready to receive (RTR), naming our nonce: stale files are ignored.
        const std::string peer = "the responder (rdma_write_responder)";
        const ConnectionDescriptor peer_qp =
            wait_for_connection_descriptor({args.remote_descriptor_path, peer, args.timeout_s, local.nonce});
        info("peer: QPN 0x%06x, PSN 0x%06x, GID %s", peer_qp.qp_num, peer_qp.psn, gid_to_string(peer_qp.gid).c_str());
        remote = wait_for_resource_descriptor({args.resource_descriptor_path, peer, args.timeout_s, local.nonce},
                                              ResourceKind::mmap);
        //! [exchange]

        step(5, "move the QP INIT -> RTR -> RTS");
        //! [modify_qp]
        attr = {};
        attr.qp_state = IBV_QPS_RTR;                // Ready To Receive: needs to know the peer
        attr.path_mtu = path_mtu(dev, peer_qp.mtu); // largest packet payload both sides support
        attr.dest_qp_num = peer_qp.qp_num;          // the peer's QP, from its descriptor
        attr.rq_psn = peer_qp.psn;                  // the first sequence number the peer will send
        attr.max_dest_rd_atomic = 0;                // READs/atomics the peer may have in flight at us: none
        attr.min_rnr_timer = 12;             // a code: 0.64 ms before a sender retries a SEND we had no receive for
        attr.ah_attr.is_global = 1;          // address the peer by GID (required on RoCE; v2 sends IP/UDP, no GRH)
        attr.ah_attr.grh.dgid = peer_qp.gid; // the peer's GID (on RoCE, built from its IP address)
        attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(dev.gid_index); // our GID
        attr.ah_attr.grh.hop_limit = 64;                                        // like an IP TTL
        attr.ah_attr.dlid = peer_qp.lid;                                        // InfiniBand only; 0 on RoCE
        attr.ah_attr.port_num = dev.port;
        check_rc(ibv_modify_qp(qp.get(), &attr,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
                 "ibv_modify_qp(RTR)");

        attr = {};
        attr.qp_state = IBV_QPS_RTS; // Ready To Send
        attr.sq_psn = psn;           // our first sequence number, as published
        attr.timeout = 14;           // wait 4.096 us * 2^14 = 67 ms for an ACK before resending
        attr.retry_cnt = 6;          // resend 6 times, then fail with RETRY_EXC_ERR (a dead peer: ~0.5 s)
        attr.rnr_retry = 6;          // retry 6 times when the peer has no receive (7 = forever, IBTA)
        attr.max_rd_atomic = 0;      // READs/atomics we may have in flight: none, we only write
        check_rc(ibv_modify_qp(qp.get(), &attr,
                               IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_MAX_QP_RD_ATOMIC),
                 "ibv_modify_qp(RTS)");
        //! [modify_qp]
        trace_qp_timers(qp.get()); // -v: what the QP now holds
    }
    info("responder exports addr 0x%llx, length %u, rkey 0x%x, access %s", static_cast<unsigned long long>(remote.addr),
         remote.length, remote.rkey, access_to_string(remote.access).c_str());
    // Stay inside what the peer exported, and ask only for what it granted: check before posting.
    if (args.message.size() > remote.length)
        throw Error("the string is " + std::to_string(args.message.size()) + " bytes but the responder exported only " +
                        std::to_string(remote.length),
                    "write a shorter string with -w");
    if (!(remote.access & IBV_ACCESS_REMOTE_WRITE))
        throw Error("the responder's memory does not grant remote write (access " + access_to_string(remote.access) +
                        ")",
                    "the responder must register its buffer with IBV_ACCESS_REMOTE_WRITE");

    step(6, "post an RDMA WRITE of %zu bytes to remote addr 0x%llx, rkey 0x%x", args.message.size(),
         static_cast<unsigned long long>(remote.addr), remote.rkey);
    //! [post_write]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // local source...
    sge.length = static_cast<std::uint32_t>(args.message.size());
    sge.lkey = mr->lkey; // ...and the key that proves we registered it
    ibv_send_wr wr{};
    wr.wr_id = 1; // ours to choose: its completion carries it back
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote.addr; // where in the responder's memory...
    wr.wr.rdma.rkey = remote.rkey;        // ...and the key it handed out for it
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(RDMA_WRITE)");
    //! [post_write]

    step(7, "poll the completion queue until the WRITE completes");
    //! [poll]
    // Completions are ordered within one work queue, not between our send and receive queues: find
    // ours by wr_id, and keep any other completion for the wait that wants it.
    ibv_wc wc{};
    Waiter waiter(args.timeout_s, "the RDMA WRITE's completion", dev.ctx.get());
    while (!completions.take(1, wc)) // polled already (and kept)?
        if (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 1)
            completions.keep(wc); // one completion, whichever it is: keep it, take() looks again
        else
            waiter.pause(); // nothing yet: give the CPU away; give up after -t seconds
    completions.check(wc, IBV_WC_RDMA_WRITE, "the RDMA WRITE"); // status, opcode; a flush names its cause
    //! [poll]
    result("Requester has written: \"%s\"", args.message.c_str());

    step(8, "say goodbye with a zero-length SEND: on RC it arrives after the WRITE");
    //! [goodbye]
    ibv_send_wr bye{}; // no scatter/gather list: zero bytes, it consumes the receive the responder posted
    bye.wr_id = goodbye_wr_id;
    bye.opcode = IBV_WR_SEND;
    bye.send_flags = IBV_SEND_SIGNALED;
    check_post(ibv_post_send(qp.get(), &bye, &bad_wr), "ibv_post_send(SEND, goodbye)");
    // The loop of step 7 again, as one call (completions.hpp): every later lesson waits this way.
    // its ACK came back: the responder has it
    completions.wait(goodbye_wr_id, IBV_WC_SEND, args.timeout_s, "the goodbye SEND");
    //! [goodbye]

    if (args.use_cm) {
        step(9, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(cm, args.timeout_s);
    }
} // qp, cq, mr, pd and the device close here, in reverse order of creation

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_write_requester",
                           .role = "requester",
                           .summary =
                               "RDMA WRITE, requester side: write a string into the responder's exported memory.",
                           .message_flag = 'w',
                           .message_help = "string to write",
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
