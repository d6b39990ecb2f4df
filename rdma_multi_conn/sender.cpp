/**
 * @file sender.cpp
 * @brief Many connections, sender side: one RC QP per receiver, the same message SENT on each.
 *
 * N QPs share one PD, one MR (the message, read locally by every SEND) and one CQ; each SEND carries
 * its connection's index as wr_id, so its completion says which connection it finished on. Every
 * receiver posts its receive before it can be reached (its descriptor, or its accept), so a SEND
 * never meets "receiver not ready".
 *
 * Descriptor files (-nc N): we are the requester and publish first, "<path>-0000" ... per connection.
 * RDMA CM (-cm): without -sa this process is the server and sends to each of -nc clients as it
 * connects; with -sa it is one client of a receiving server. See receiver.cpp for the other side.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <cstring>
#include <vector>

using namespace rdma_samples;

/** Post the message as a SEND on @p qp; @p conn comes back as the completion's wr_id. */
static void post_message(ibv_qp *qp, const Buffer &buf, const ibv_mr *mr, std::size_t len, int conn)
{
    //! [post_send]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data()); // all connections send from the same bytes
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(conn); // tells the completions apart (wc.qp_num would too)
    wr.opcode = IBV_WR_SEND;                     // two-sided: lands in the receive the peer posted
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_rc(ibv_post_send(qp, &wr, &bad_wr), "ibv_post_send(SEND, connection " + std::to_string(conn) + ")");
    //! [post_send]
}

/** Take every completion there is; wr_id is the connection. */
static void take_completions(ibv_cq *cq, const Args &args, std::vector<CmClient> &clients)
{
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(cq, 1, &wc)) > 0) {
        CmClient &c = clients[wc.wr_id];
        if (wc.status == IBV_WC_SUCCESS) {
            result("Sender has sent: \"%s\", connection %llu", args.message.c_str(), static_cast<unsigned long long>(wc.wr_id));
            c.done = true;
        } else if (c.lost.empty()) {
            c.lost = std::string("its SEND completed with ") + wc_status_name(wc.status) + ": " + hint_for_wc_status(wc.status);
        }
    }
}

/** How many clients are through, sent to or lost. */
static int finished(const std::vector<CmClient> &clients)
{
    int f = 0;
    for (const auto &c : clients)
        f += (c.done || !c.lost.empty()) ? 1 : 0;
    return f;
}

/** The CM server: accept up to n receivers and SEND to each once it is connected. */
static void serve(const Args &args, const Device &dev, ibv_cq *cq, std::vector<QpPtr> &qps, const Buffer &buf, const ibv_mr *mr)
{
    const int n = static_cast<int>(qps.size());
    CmConnection server = cm_listen(args, n);
    info("listening on port %u for %d receivers; waiting up to %d s for each event", args.listen_port, n, args.timeout_s);
    std::vector<CmClient> clients(qps.size()); // client i uses qps[i]
    int arrived = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.timeout_s);
    //! [server_loop]
    while (finished(clients) < n && std::chrono::steady_clock::now() < deadline) {
        take_completions(cq, args, clients);
        CmEventPtr ev = next_cm_event(server.channel.get(), std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
        if (!ev)
            continue;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.timeout_s); // progress: -t again
        const int i = find_client(clients, ev->id);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            if (arrived == n) { // more receivers than -nc: refuse
                reject_request(std::move(ev));
                continue;
            }
            CmClient &c = clients[arrived];
            c.id.reset(ev->id);
            c.qp = qps[arrived].get();
            c.addr = addr_to_string(rdma_get_peer_addr(ev->id));
            check_cm_device(ev->id, dev);
            cm_ready_qp(ev->id, qps[arrived].get());
            rdma_conn_param param = cm_conn_param(qps[arrived].get());
            check_rc(rdma_accept(ev->id, &param), "rdma_accept");
            ++arrived;
        } else if (ev->event == RDMA_CM_EVENT_ESTABLISHED && i >= 0) {
            clients[i].established = true;
            result("connection %d established from %s", i, clients[i].addr.c_str());
            // The client posted its receive before connecting: we may SEND at once.
            post_message(qps[i].get(), buf, mr, args.message.size(), i);
        } else if (i >= 0 && (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
                              ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_REJECTED)) {
            clients[i].disconnected = true;
            rdma_disconnect(ev->id); // answer the client's DREQ with a DREP, or it waits for one until -t
            take_completions(cq, args, clients); // its SEND may have completed already
            if (!clients[i].done && clients[i].lost.empty()) {
                clients[i].lost = "the receiver went away (" + cm_event_name(ev->event) + ") before our SEND completed";
                info("connection %d lost: %s", i, clients[i].lost.c_str());
            }
        }
    }
    //! [server_loop]
    take_completions(cq, args, clients);
    disconnect_clients(server.channel.get(), clients, args.timeout_s);

    int sent = 0;
    std::string lost;
    for (int i = 0; i < arrived; ++i) {
        sent += clients[i].done ? 1 : 0;
        if (!clients[i].done)
            lost += " connection " + std::to_string(i) + " (" + (clients[i].lost.empty() ? "no completion" : clients[i].lost) + ");";
    }
    if (sent < n)
        throw Error((arrived < n ? "timed out after " + std::to_string(args.timeout_s) + " s without a new receiver: " : std::string()) +
                        std::to_string(arrived) + " of " + std::to_string(n) + " receivers connected, " + std::to_string(sent) +
                        " of " + std::to_string(n) + " messages sent" + (lost.empty() ? "" : "; lost:" + lost),
                    arrived < n ? "start the missing receivers (rdma_multi_conn_receive -cm -sa ADDR) within -t, or lower -nc"
                                : "a receiver stopped early; its output says why");
}

static void run(const Args &args)
{
    const bool cm_client = args.use_cm && args.server_addr;
    const int n = cm_client ? 1 : args.num_connections;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index, gid_to_string(dev.gid).c_str());

    step(2, "register the %zu-byte message once; every connection sends from it", args.message.size());
    Buffer buf(max_message_length);
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    //! [reg_mr]
    // DOCA's table: the sender's mmap is local read/write. A SEND's source is only read by our own
    // device: no remote access.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create one completion queue for all connections and %d RC queue pair(s)", n);
    // One CQ serves all QPs, so it needs room for what every one of them can have outstanding.
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 2};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), n * cq_entries(caps), nullptr, nullptr, 0), "ibv_create_cq"));
    Completions done(cq.get());
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps));
        qp_to_init(qps.back().get(), dev, 0);
    }
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);

    if (!args.use_cm) {
        step(4, "publish a connection descriptor per QP (%s-0000 ...)", args.local_descriptor_path.c_str());
        std::vector<ConnectionDescriptor> local;
        for (int i = 0; i < n; ++i) {
            local.push_back(describe_qp(qps[i].get(), dev, random_psn(), new_nonce()));
            write_descriptor_file(numbered_path(args.local_descriptor_path, i), format_descriptor(local.back()));
        }
        step(5, "for each connection: wait for the receiver's answer, move the QP to RTR and RTS");
        for (int i = 0; i < n; ++i) {
            const ConnectionDescriptor remote = wait_for_connection_descriptor(
                {numbered_path(args.remote_descriptor_path, i), "the receiver (rdma_multi_conn_receive)", args.timeout_s,
                 local[i].nonce});
            qp_to_rtr(qps[i].get(), dev, remote);
            qp_to_rts(qps[i].get(), local[i].psn);
        }
        step(6, "post a SEND of \"%s\" on every connection", args.message.c_str());
        for (int i = 0; i < n; ++i)
            post_message(qps[i].get(), buf, mr.get(), args.message.size(), i);
        step(7, "poll the shared completion queue for %d SEND completion(s)", n);
        for (int i = 0; i < n; ++i) { // they complete in any order: wait for each by its wr_id
            done.wait(static_cast<std::uint64_t>(i), IBV_WC_SEND, args.timeout_s, "the SEND on connection " + std::to_string(i));
            result("Sender has sent: \"%s\", connection %d", args.message.c_str(), i);
        }
    } else if (cm_client) {
        step(4, "connect to the receiving server with RDMA CM (%s port %u)", args.server_addr->c_str(), args.listen_port);
        CmConnection cm = cm_connect(args, dev, qps[0].get());
        step(5, "post a SEND of \"%s\"; the server posted its receive before accepting", args.message.c_str());
        post_message(qps[0].get(), buf, mr.get(), args.message.size(), 0);
        done.wait(0, IBV_WC_SEND, args.timeout_s, "the SEND");
        result("Sender has sent: \"%s\", connection 0", args.message.c_str());
        step(6, "disconnect (RDMA CM)");
        cm_disconnect(cm, args.timeout_s);
    } else {
        step(4, "serve %d receivers with RDMA CM on port %u: accept each, SEND to it once connected", n, args.listen_port);
        serve(args, dev, cq.get(), qps, buf, mr.get());
    }
} // the QPs (all of them), cq, mr, pd and the device close here

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_multi_conn_send",
                           .role = "sender",
                           .summary = "Many connections, sender side: one RC QP per receiver, SEND the same string on each.",
                           .message_flag = 's',
                           .message_help = "string to send",
                           .resource_descriptor = false,
                           .multi_conn = true,
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
