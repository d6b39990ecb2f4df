/**
 * @file receiver.cpp
 * @brief Many connections, receiver side: one RC QP per sender, one message on each, one shared CQ.
 *
 * RC is one QP per peer: talking to N peers means N QPs. They can share one protection domain, one
 * memory region and one completion queue; a completion says which QP it belongs to (wc.qp_num) and
 * carries the wr_id we chose when posting, here the buffer slot. Every receive is posted before its
 * sender can reach it, so no sender ever meets "receiver not ready". The receiver sleeps on a
 * completion channel instead of spinning. (rdma_srq_receive is this receiver with one shared receive
 * queue for all the QPs.)
 *
 * Two ways to connect (see rdma_write for the single-QP versions of both):
 *  - descriptor files (-nc N): one file per connection, "<path>-0000", "<path>-0001", ...;
 *  - RDMA CM (-cm): without -sa this process is the server and waits for -nc clients (each a separate
 *    rdma_multi_conn_send -cm -sa ADDR); with -sa it is one client of a sending server.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/async_events.hpp>
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

#include <poll.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace rdma_samples;

namespace {

/** What every flow shares: where messages land, where receives are posted, where we sleep. */
struct Receiver {
    ibv_context *ctx;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    const std::vector<QpPtr> &qps;
    const Buffer &buf;
    const ibv_mr *mr;
};

/** Post buffer slot @p slot as a receive on @p qp. */
void post_receive(const Receiver &r, ibv_qp *qp, std::uint64_t slot)
{
    //! [post_recv]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(r.buf.data() + slot * max_message_length);
    sge.length = static_cast<std::uint32_t>(max_message_length);
    sge.lkey = r.mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot; // comes back in the completion: which slot holds the message
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_rc(ibv_post_recv(qp, &wr, &bad_wr), "ibv_post_recv(slot " + std::to_string(slot) + ")");
    //! [post_recv]
}

/** Which connection a completion belongs to: the index of the QP whose number it carries. */
int connection_of(const Receiver &r, const ibv_wc &wc)
{
    for (std::size_t i = 0; i < r.qps.size(); ++i)
        if (r.qps[i]->qp_num == wc.qp_num)
            return static_cast<int>(i);
    return -1;
}

/** Print the message that completion @p wc brought; wr_id is its slot, qp_num its connection. */
void print_message(const Receiver &r, const ibv_wc &wc)
{
    const char *msg = r.buf.data() + wc.wr_id * max_message_length;
    result("Got from sender: \"%.*s\", connection %d", static_cast<int>(wc.byte_len), msg, connection_of(r, wc));
}

/** Take every completion the CQ holds (poll until empty). */
std::vector<ibv_wc> take_completions(const Receiver &r)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(r.cq, 1, &wc)) > 0)
        taken.push_back(wc);
    return taken;
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion (the channel) or, when
 * @p cm_fd >= 0, an RDMA CM event. Arm first, then look once more.
 * @return true when the CM's channel has an event; false when nothing came in time
 */
bool sleep_on_channel(const Receiver &r, int cm_fd, int wait_ms, std::vector<ibv_wc> &taken)
{
    //! [sleep]
    // Arm the CQ: its NEXT completion raises an event on the channel. A completion that came after
    // our last poll but before the arm raises none, so poll once more after arming, and sleep only if
    // that finds nothing (the event it would have raised is taken and acknowledged on a later sleep).
    check_rc(ibv_req_notify_cq(r.cq, 0), "ibv_req_notify_cq");
    taken = take_completions(r);
    if (!taken.empty())
        return false;
    // Sleep on the channel's fd and the CM's: poll() bounds it by -t, which ibv_get_cq_event() alone
    // would not.
    pollfd fds[2] = {{r.channel->fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (poll(fds, cm_fd >= 0 ? 2 : 1, wait_ms) <= 0)
        return false;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(r.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
        ibv_ack_cq_events(ev_cq, 1); // ... and acknowledge it: ibv_destroy_cq() waits for every one
        taken = take_completions(r); // then poll until empty; the next sleep re-arms
    }
    //! [sleep]
    return cm_fd >= 0 && (fds[1].revents & POLLIN);
}

/** Report the completions taken: print each message not printed yet, mark each connection. */
void report(const Receiver &r, const std::vector<ibv_wc> &taken, CmClients &clients)
{
    for (const ibv_wc &wc : taken) {
        const int conn = connection_of(r, wc);
        if (conn < 0)
            continue;
        if (clients.mark_established(conn)) // its message overtook the ESTABLISHED event: the connection is up
            result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
        if (wc.status == IBV_WC_SUCCESS) {
            print_message(r, wc);
            clients.mark_done(conn);
        } else {
            clients.mark_lost(conn, std::string("its receive completed with ") + wc_status_name(wc.status));
        }
    }
}

/** The CM server: accept up to n senders, print each message as it arrives, survive the ones that fail. */
void serve(const Args &args, const Device &dev, const Receiver &r)
{
    const std::vector<QpPtr> &qps = r.qps;
    CmConnection listener = cm_listen(args.listen_port, static_cast<int>(qps.size()));
    CmClients clients(qps); // client i gets qps[i]
    info("listening on port %u for %zu senders; waiting up to %d s for each event", args.listen_port, qps.size(),
         args.timeout_s);
    Deadline idle(args.timeout_s); // -t bounds the wait for each next event, not the whole service
    //! [server_loop]
    while (!clients.all_finished() && !idle.expired()) {
        // 1. Messages: one CQ for all QPs; wc.qp_num names the connection.
        std::vector<ibv_wc> taken = take_completions(r);
        report(r, taken, clients);
        // 2. Sleep until a completion or a CM event comes.
        const bool cm_event = sleep_on_channel(r, listener.channel->fd, idle.left_ms(), taken);
        report(r, taken, clients);
        if (!cm_event)
            continue;
        rdma_cm_event *event = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &event), "rdma_get_cm_event");
        CmEventPtr ev(event); // rdma_ack_cm_event() when it goes: every event must be acknowledged
        idle.restart();       // progress: -t again
        const int conn = clients.find(ev->id);
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: { // a sender's REQ, with a new cm_id for its connection
            const int next = clients.admit(ev->id);
            if (next < 0) { // more senders than -nc: refuse (the sender sees REJECTED)
                check_rc(rdma_reject(ev->id, nullptr, 0), "rdma_reject");
                rdma_cm_id *id = ev->id;
                ev.reset(); // acknowledge the event before destroying its id
                rdma_destroy_id(id);
                break;
            }
            check_cm_device(ev->id, dev);
            cm_ready_qp(ev->id, qps[static_cast<std::size_t>(next)].get()); // RTR, RTS: its receive is posted
            rdma_conn_param param = cm_conn_param(qps[static_cast<std::size_t>(next)].get());
            check_rc(rdma_accept(ev->id, &param), "rdma_accept"); // our REP
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED: // the sender's RTU: the connection is up
            if (conn >= 0 && clients.mark_established(conn))
                result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
            break;
        case RDMA_CM_EVENT_DISCONNECTED: // the sender's DREQ, or the CM gave up on it
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            if (conn < 0)
                break;
            report(r, take_completions(r), clients); // its message may be in the CQ already
            clients.mark_lost(conn,
                              "the sender went away (" + cm_event_name(ev->event) + ") before its message arrived");
            ev.reset();                      // acknowledged before its cm_id goes (answering destroys it)
            clients.mark_disconnected(conn); // answered (DREP) now that its connection is finished
            break;
        default: // TIMEWAIT_EXIT and the like: nothing to do
            break;
        }
    }
    //! [server_loop]
    report(r, take_completions(r), clients);
    clients.finish(listener, args.timeout_s, "sender", "messages arrived",
                   "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc",
                   "a sender stopped early; its output says why");
}

/** Wait for @p n messages (descriptor files, or a CM client): sleep on the channel, check each. */
void wait_for_messages(const Receiver &r, int n, int timeout_s, const std::string &what)
{
    const Deadline deadline(timeout_s);
    Completions completions(r.cq);
    for (int got = 0; got < n;) { // they arrive in any order; wc.qp_num says which connection each is
        std::vector<ibv_wc> taken = take_completions(r);
        if (taken.empty() && !deadline.expired())
            sleep_on_channel(r, -1, deadline.left_ms(), taken);
        if (taken.empty() && deadline.expired())
            throw with_async_events(
                timeout_error(timeout_s, what, "is every sender still running? its output says why it stopped"), r.ctx);
        for (const ibv_wc &wc : taken) {
            completions.check(wc, IBV_WC_RECV, "the message on connection " + std::to_string(connection_of(r, wc)));
            print_message(r, wc);
            ++got;
        }
    }
}

void run(const Args &args)
{
    const bool cm_client = args.use_cm && args.server_addr;
    const int n = cm_client ? 1 : args.num_connections;

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register one buffer with a %zu-byte slot per connection (%d), local write only", max_message_length, n);
    Buffer buf(static_cast<std::size_t>(n) * max_message_length);
    // DOCA's table: the receiver's mmap is local read/write. The device writes each incoming message
    // into a slot, a local write on our behalf; SEND/RECEIVE is two-sided, so no remote access at all.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion channel, one completion queue for all connections and %d RC queue pair(s)", n);
    //! [qps]
    // One CQ is enough for every QP, if it has room for all they can have outstanding at once: the
    // rule is entries >= sends + receives that can be outstanding, summed over the QPs (2 + 2 each
    // here); every send counts, signaled or not, because a failed or flushed one completes too.
    // Its completion channel is where we sleep while nothing completes (step 6).
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 2};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), n * cq_entries(caps), nullptr, channel.get(), 0), "ibv_create_cq"));
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps));
        qp_to_init(qps.back().get(), dev, 0); // a receive-only QP grants the peer nothing remote
    }
    //! [qps]
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);
    const Receiver r{dev.ctx.get(), cq.get(), channel.get(), qps, buf, mr.get()};

    step(4, "post a receive on every QP before any sender can reach it");
    for (int i = 0; i < n; ++i)
        post_receive(r, qps[static_cast<std::size_t>(i)].get(), static_cast<std::uint64_t>(i)); // slot i

    if (!args.use_cm) {
        step(5, "for each connection: read the sender's descriptor, move to RTR/RTS, answer with ours");
        for (int i = 0; i < n; ++i) {
            const ConnectionDescriptor remote =
                wait_for_connection_descriptor({numbered_path(args.remote_descriptor_path, i),
                                                "the sender (rdma_multi_conn_send)",
                                                args.timeout_s,
                                                {}});
            const std::uint32_t psn = random_psn();
            qp_to_rtr(qps[i].get(), dev, remote);
            qp_to_rts(qps[i].get(), psn);
            ConnectionDescriptor local = describe_qp(qps[i].get(), dev, psn, new_nonce());
            local.peer_nonce = remote.nonce;
            write_descriptor_file(numbered_path(args.local_descriptor_path, i), format_descriptor(local));
        }
        step(6, "sleep on the completion channel until %d message(s) arrived", n);
        wait_for_messages(r, n, args.timeout_s, "the messages of " + std::to_string(n) + " connection(s)");
        step(7, "keep the QPs a moment: if an ACK of ours was lost, its sender resends the message");
        // Like TCP's TIME_WAIT (rc_qp.hpp, retransmit_window_ms()): a QP destroyed at once could not
        // acknowledge the resend, and the sender would fail although its message arrived.
        std::this_thread::sleep_for(std::chrono::milliseconds(retransmit_window_ms(qps[0].get())));
    } else if (cm_client) {
        step(5, "connect to the sending server with RDMA CM (%s port %u)", args.server_addr->c_str(), args.listen_port);
        CmConnection cm = cm_connect(args.cm_server(), args.timeout_s, dev, qps[0].get());
        step(6, "sleep on the completion channel until the server's message arrived");
        wait_for_messages(r, 1, args.timeout_s, "the server's message");
        step(7, "disconnect (RDMA CM)");
        cm_disconnect(cm, args.timeout_s);
    } else {
        step(5, "serve %d senders with RDMA CM on port %u: accept each, print its message as it arrives", n,
             args.listen_port);
        serve(args, dev, r);
    }
} // the QPs (all of them), cq, channel, mr, pd and the device close here

} // namespace

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_multi_conn_receive",
                     .role = "receiver",
                     .summary = "Many connections, receiver side: one RC QP per sender, print the message each sends.",
                     .resource_descriptor = false,
                     .multi_conn = true,
                     .rdma_cm = true};
    return run_sample(spec, argc, argv, run);
}
