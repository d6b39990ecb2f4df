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
 * connects; with -sa it is one client of a receiving server. The SEND and the server's completions are
 * in sending.hpp. See receiver.cpp for the other side.
 */
#include "sending.hpp"
#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace rdma_samples;
using namespace rdma_multi_conn;

namespace {

/** The CM server: accept up to n receivers and SEND to each once it is connected. */
void serve(const Args &args, const Device &dev, ibv_cq *cq, const std::vector<QpPtr> &qps, const Buffer &buf,
           const ibv_mr *mr)
{
    CmConnection listener = cm_listen(dev, args.listen_port, static_cast<int>(qps.size()));
    CmClients clients(qps); // client i gets qps[i]
    info("listening on port %u for %zu receivers; waiting up to %d s for each event", args.listen_port, qps.size(),
         args.timeout_s);
    Deadline idle(args.timeout_s); // -t bounds the wait for each next event, not the whole service
    while (!clients.all_finished() && !idle.expired()) {
        take_completions(cq, args, clients);
        if (!cm_event_ready(listener.channel.get(), 20))
            continue;
        rdma_cm_event *event = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &event), "rdma_get_cm_event");
        CmEventPtr ev(event); // rdma_ack_cm_event() when it goes: every event must be acknowledged
        idle.restart();       // progress: -t again
        const int conn = clients.find(ev->id);
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: { // a receiver's REQ, with a new cm_id for its connection
            const int next = clients.admit(ev->id);
            if (next < 0) { // more receivers than -nc: refuse (the receiver sees REJECTED)
                refuse_request(ev);
                break;
            }
            check_cm_device(ev->id, dev);
            cm_ready_qp(ev->id, qps[static_cast<std::size_t>(next)].get()); // RTR, RTS
            rdma_conn_param param = cm_conn_param(qps[static_cast<std::size_t>(next)].get());
            check_rc(rdma_accept(ev->id, &param), "rdma_accept"); // our REP
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED: // the receiver's RTU: the connection is up
            if (conn < 0 || !clients.mark_established(conn))
                break;
            result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
            // The client posted its receive before connecting: we may SEND at once.
            post_message(qps[static_cast<std::size_t>(conn)].get(), buf, mr, args.message.size(), conn);
            break;
        case RDMA_CM_EVENT_DISCONNECTED: // the receiver's DREQ, or the CM gave up on it
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            if (conn < 0)
                break;
            if (!clients.client(conn).established)
                clients.mark_lost(conn, "the receiver went away (" + cm_event_name(ev->event) +
                                            ") before the connection was up");
            // Once connected, our SEND's completion says how it ended (success or an error); the
            // DREQ is answered (DREP) only then, so that our QP stays to resend a SEND whose ACK was lost.
            ev.reset(); // acknowledged before its cm_id goes (answering destroys it)
            clients.mark_disconnected(conn);
            break;
        default: // TIMEWAIT_EXIT and the like: nothing to do
            break;
        }
    }
    take_completions(cq, args, clients);
    clients.finish(listener, args.timeout_s, "receiver", "messages sent",
                   "start the missing receivers (rdma_multi_conn_receive -cm -sa ADDR) within -t, or lower -nc",
                   "a receiver stopped early; its output says why");
}

void run(const Args &args)
{
    const Flow flow = flow_of(args); // descriptor files, an RDMA CM client or server (support/options.hpp)
    const int n = connections(args, flow);

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_rdma_cm_on_iwarp(dev, args.use_cm); // iWARP connects only through RDMA CM (rdma_write's step 4)
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register the %zu-byte message once; every connection sends from it", args.message.size());
    Buffer buf(std::max<std::size_t>(args.message.size(), 1)); // what we send and no more (a region is never empty)
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    // A SEND's source is only read by our own device: verbs needs no flag for it; LOCAL_WRITE is
    // DOCA's choice (its table gives the sender's mmap local read/write). No remote access.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create one completion queue for all connections and %d RC queue pair(s)", n);
    // One CQ serves all QPs, so it needs room for what every one of them can have outstanding.
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 2};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), n * cq_entries(caps), nullptr, nullptr, 0), "ibv_create_cq"));
    Completions completions(cq.get());
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps));
        qp_to_init(qps.back().get(), dev, 0); // a send-only QP grants the peer nothing remote
    }
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);

    switch (flow) {
    case Flow::descriptor_files: {
        step(4, "publish a connection descriptor per QP (%s-0000 ...)", args.local_descriptor_path.c_str());
        std::vector<ConnectionDescriptor> local;
        for (int i = 0; i < n; ++i) {
            local.push_back(describe_qp(qps[i].get(), dev, random_psn(), new_nonce()));
            write_descriptor_file(numbered_path(args.local_descriptor_path, i), format_descriptor(local.back()));
        }
        step(5, "for each connection: wait for the receiver's answer, move the QP to RTR and RTS");
        for (int i = 0; i < n; ++i) {
            const ConnectionDescriptor remote = wait_for_connection_descriptor(
                {numbered_path(args.remote_descriptor_path, i), "the receiver (rdma_multi_conn_receive)",
                 args.timeout_s, local[i].nonce});
            qp_to_rtr(qps[i].get(), dev, remote);
            qp_to_rts(qps[i].get(), local[i].psn);
        }
        step(6, "post a SEND of \"%s\" on every connection", args.message.c_str());
        for (int i = 0; i < n; ++i)
            post_message(qps[i].get(), buf, mr.get(), args.message.size(), i);
        step(7, "poll the shared completion queue for %d SEND completion(s)", n);
        for (int i = 0; i < n; ++i) { // they complete in any order: wait() keeps the others for their turn
            completions.wait(static_cast<std::uint64_t>(i), IBV_WC_SEND, args.timeout_s,
                             "the SEND on connection " + std::to_string(i));
            result("Sender has sent: \"%s\", connection %d", args.message.c_str(), i);
        }
        break;
    }
    case Flow::cm_client: {
        step(4, "connect to the receiving server with RDMA CM (%s port %u)", args.server_addr->c_str(),
             args.listen_port);
        CmConnection cm = cm_connect(args.cm_server(), args.timeout_s, dev, qps[0].get());
        step(5, "post a SEND of \"%s\"; the server posted its receive before accepting", args.message.c_str());
        post_message(qps[0].get(), buf, mr.get(), args.message.size(), 0);
        completions.wait(0, IBV_WC_SEND, args.timeout_s, "the SEND");
        result("Sender has sent: \"%s\", connection 0", args.message.c_str());
        step(6, "disconnect (RDMA CM)");
        cm_disconnect(cm, args.timeout_s);
        break;
    }
    case Flow::cm_server:
        step(4, "serve %d receivers with RDMA CM on port %u: accept each, SEND to it once connected", n,
             args.listen_port);
        serve(args, dev, cq.get(), qps, buf, mr.get());
        break;
    }
} // the QPs (all of them), cq, mr, pd and the device close here

} // namespace

int main(int argc, char **argv)
{
    return run_sample(sender_spec(), argc, argv, run);
}
