/**
 * @file receiver.cpp
 * @brief Many connections, receiver side: one RC QP per sender, one message on each, one shared CQ.
 *
 * RC is one QP per peer: talking to N peers means N QPs. They can share one protection domain, one
 * memory region and one completion queue; a completion says which QP it belongs to (wc.qp_num) and
 * carries the wr_id we chose when posting, here the connection's index. Every QP gets its receive
 * posted before its sender can reach it, so no sender ever meets "receiver not ready".
 *
 * Two ways to connect (see rdma_write for the single-QP versions of both):
 *  - descriptor files (-nc N): one file per connection, "<path>-0000", "<path>-0001", ...;
 *  - RDMA CM (-cm): without -sa this process is the server and waits for -nc clients (each a separate
 *    rdma_multi_conn_send -cm -sa ADDR); with -sa it is one client of a sending server.
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

/** Print the message that completion @p wc brought; the connection is its wr_id. */
static void print_message(const ibv_wc &wc, const Buffer &buf)
{
    const char *msg = buf.data() + wc.wr_id * max_message_length;
    result("Got from sender: \"%.*s\", connection %llu", static_cast<int>(wc.byte_len), msg,
           static_cast<unsigned long long>(wc.wr_id));
}

/** Take every completion there is: print each message, note each failure. wr_id is the connection. */
static void take_completions(ibv_cq *cq, const Buffer &buf, std::vector<CmClient> &clients)
{
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(cq, 1, &wc)) > 0) {
        CmClient &c = clients[wc.wr_id];
        if (!c.established) { // its message overtook the ESTABLISHED event: the connection is up
            c.established = true;
            result("connection %llu established from %s", static_cast<unsigned long long>(wc.wr_id), c.addr.c_str());
        }
        if (wc.status == IBV_WC_SUCCESS) {
            print_message(wc, buf);
            c.done = true;
        } else if (c.lost.empty()) {
            c.lost = std::string("its receive completed with ") + wc_status_name(wc.status);
        }
    }
}

/** How many clients are through, with their message or lost. */
static int finished(const std::vector<CmClient> &clients)
{
    int f = 0;
    for (const auto &c : clients)
        f += (c.done || !c.lost.empty()) ? 1 : 0;
    return f;
}

/** The CM server: accept up to n senders, print each message as it arrives, survive the ones that fail. */
static void serve(const Args &args, const Device &dev, ibv_cq *cq, std::vector<QpPtr> &qps, const Buffer &buf)
{
    const int n = static_cast<int>(qps.size());
    CmConnection server = cm_listen(args, n);
    info("listening on port %u for %d senders; waiting up to %d s for each event", args.listen_port, n, args.timeout_s);
    std::vector<CmClient> clients(qps.size()); // client i uses qps[i]
    int arrived = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.timeout_s);
    //! [server_loop]
    while (finished(clients) < n && std::chrono::steady_clock::now() < deadline) {
        // 1. Messages: one CQ for all QPs; wr_id names the connection.
        take_completions(cq, buf, clients);
        // 2. CM events, waiting briefly so that messages are printed as they arrive.
        CmEventPtr ev = next_cm_event(server.channel.get(), std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
        if (!ev)
            continue;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.timeout_s); // progress: -t again
        const int i = find_client(clients, ev->id);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            if (arrived == n) { // more senders than -nc: refuse
                reject_request(std::move(ev));
                continue;
            }
            CmClient &c = clients[arrived];
            c.id.reset(ev->id);
            c.qp = qps[arrived].get();
            c.addr = addr_to_string(rdma_get_peer_addr(ev->id));
            check_cm_device(ev->id, dev);
            // Its receive is posted already (step 4): ready to receive, then accept.
            cm_ready_qp(ev->id, qps[arrived].get());
            rdma_conn_param param = cm_conn_param(qps[arrived].get());
            check_rc(rdma_accept(ev->id, &param), "rdma_accept");
            ++arrived;
        } else if (ev->event == RDMA_CM_EVENT_ESTABLISHED && i >= 0 && !clients[i].established) {
            clients[i].established = true;
            result("connection %d established from %s", i, clients[i].addr.c_str());
        } else if (i >= 0 && (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
                              ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_REJECTED)) {
            clients[i].disconnected = true;
            rdma_disconnect(ev->id); // answer the client's DREQ with a DREP, or it waits for one until -t
            take_completions(cq, buf, clients); // its message may be in the CQ already
            if (!clients[i].done && clients[i].lost.empty()) {
                clients[i].lost = "the sender went away (" + cm_event_name(ev->event) + ") before its message arrived";
                info("connection %d lost: %s", i, clients[i].lost.c_str());
            }
        }
    }
    //! [server_loop]
    take_completions(cq, buf, clients);
    disconnect_clients(server.channel.get(), clients, args.timeout_s);

    int got = 0;
    std::string lost;
    for (int i = 0; i < arrived; ++i) {
        got += clients[i].done ? 1 : 0;
        if (!clients[i].done)
            lost += " connection " + std::to_string(i) + " (" + (clients[i].lost.empty() ? "no message" : clients[i].lost) + ");";
    }
    if (got < n)
        throw Error((arrived < n ? "timed out after " + std::to_string(args.timeout_s) + " s without a new sender: " : std::string()) +
                        std::to_string(arrived) + " of " + std::to_string(n) + " senders connected, " + std::to_string(got) +
                        " of " + std::to_string(n) + " messages arrived" + (lost.empty() ? "" : "; lost:" + lost),
                    arrived < n ? "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc"
                                : "a sender stopped early; its output says why");
}

static void run(const Args &args)
{
    const bool cm_client = args.use_cm && args.server_addr;
    const int n = cm_client ? 1 : args.num_connections;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index, gid_to_string(dev.gid).c_str());

    step(2, "register one buffer with a %zu-byte slot per connection (%d), local write only", max_message_length, n);
    Buffer buf(static_cast<std::size_t>(n) * max_message_length);
    //! [reg_mr]
    // DOCA's table: the receiver's mmap is local read/write. The device writes each incoming message
    // into a slot, a local write on our behalf; SEND/RECEIVE is two-sided, so no remote access at all.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create one completion queue for all connections and %d RC queue pair(s)", n);
    //! [qps]
    // One CQ is enough for every QP, if it has room for all they can have outstanding at once: the
    // rule is entries >= signaled sends + receives, summed over the QPs (2 + 2 each here).
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 2};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), n * cq_entries(caps), nullptr, nullptr, 0), "ibv_create_cq"));
    Completions done(cq.get());
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps));
        qp_to_init(qps.back().get(), dev, 0); // a receive-only QP grants the peer nothing remote
    }
    //! [qps]
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);

    step(4, "post a receive on every QP before any sender can reach it");
    //! [post_recv]
    for (int i = 0; i < n; ++i) {
        ibv_sge sge{};
        sge.addr = reinterpret_cast<std::uintptr_t>(buf.data() + i * max_message_length); // slot i
        sge.length = static_cast<std::uint32_t>(max_message_length);
        sge.lkey = mr->lkey;
        ibv_recv_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(i); // comes back in the completion: "connection i"
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_rc(ibv_post_recv(qps[i].get(), &wr, &bad_wr), "ibv_post_recv(connection " + std::to_string(i) + ")");
    }
    //! [post_recv]

    if (!args.use_cm) {
        step(5, "for each connection: read the sender's descriptor, move to RTR/RTS, answer with ours");
        for (int i = 0; i < n; ++i) {
            const ConnectionDescriptor remote = wait_for_connection_descriptor(
                {numbered_path(args.remote_descriptor_path, i), "the sender (rdma_multi_conn_send)", args.timeout_s, {}});
            const std::uint32_t psn = random_psn();
            qp_to_rtr(qps[i].get(), dev, remote);
            qp_to_rts(qps[i].get(), psn);
            ConnectionDescriptor local = describe_qp(qps[i].get(), dev, psn, new_nonce());
            local.peer_nonce = remote.nonce;
            write_descriptor_file(numbered_path(args.local_descriptor_path, i), format_descriptor(local));
        }
        step(6, "poll the shared completion queue for %d message(s)", n);
        for (int i = 0; i < n; ++i) // they arrive in any order: wait for each by its wr_id
            print_message(done.wait(static_cast<std::uint64_t>(i), IBV_WC_RECV, args.timeout_s,
                                    "the message on connection " + std::to_string(i)),
                          buf);
    } else if (cm_client) {
        step(5, "connect to the sending server with RDMA CM (%s port %u)", args.server_addr->c_str(), args.listen_port);
        CmConnection cm = cm_connect(args, dev, qps[0].get());
        step(6, "wait for the server's message");
        print_message(done.wait(0, IBV_WC_RECV, args.timeout_s, "the server's message"), buf);
        step(7, "disconnect (RDMA CM)");
        cm_disconnect(cm, args.timeout_s);
    } else {
        step(5, "serve %d senders with RDMA CM on port %u: accept each, print its message as it arrives", n, args.listen_port);
        serve(args, dev, cq.get(), qps, buf);
    }
} // the QPs (all of them), cq, mr, pd and the device close here

int main(int argc, char **argv)
{
    const ProgramSpec spec{.name = "rdma_multi_conn_receive",
                           .role = "receiver",
                           .summary = "Many connections, receiver side: one RC QP per sender, print the message each sends.",
                           .resource_descriptor = false,
                           .multi_conn = true,
                           .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
