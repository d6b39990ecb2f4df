/**
 * @file receiver.cpp
 * @brief A shared receive queue: N RC QPs that take their receives from one pool, refilled as messages
 * arrive, with the SRQ limit event armed.
 *
 * rdma_multi_conn_receive posts a receive on every QP: N connections need N x depth receive buffers,
 * idle on every quiet connection. Here the QPs are created with no receive queue of their own: they all
 * take from one shared receive queue (SRQ), a pool of --srq-size buffers. A completion says which QP the
 * message came on (wc.qp_num) and which buffer it is in (wc.wr_id, the slot we posted); we print it and
 * post that slot again. The device raises IBV_EVENT_SRQ_LIMIT_REACHED when the pool runs low.
 *
 * The senders are rdma_multi_conn_send's, unchanged: an SRQ is the receiver's business alone.
 * Two ways to connect, as in rdma_multi_conn:
 *  - descriptor files (-nc N): one file per connection, "<path>-0000", "<path>-0001", ...;
 *  - RDMA CM (-cm): this process is the server and waits for -nc clients (each a separate
 *    rdma_multi_conn_send -cm -sa ADDR).
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace rdma_samples;

namespace {

/** The receiver's own flags. */
struct Options {
    std::uint32_t size = 0;  ///< --srq-size: receives in the SRQ (0: one per connection)
    std::uint32_t limit = 0; ///< --srq-limit: the low-water mark (0: half the SRQ)
    int hold_ms = 0;         ///< --srq-hold-ms: demonstration, keep the SRQ empty this long
};

/** What both flows share: the pool, where messages land, where we sleep. */
struct Receiver {
    ibv_context *ctx;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    ibv_srq *srq;
    std::uint32_t limit; ///< the SRQ limit we arm, and re-arm after each event
    const std::vector<QpPtr> &qps;
    const Buffer &buf;
    const ibv_mr *mr;
};

/** Post buffer slot @p slot into the SRQ: whichever QP's message comes first takes it. */
void post_srq_receive(const Receiver &r, std::uint64_t slot)
{
    //! [post_srq_recv]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(r.buf.data() + slot * max_message_length);
    sge.length = static_cast<std::uint32_t>(max_message_length);
    sge.lkey = r.mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot; // comes back in the completion: which slot holds the message
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_rc(ibv_post_srq_recv(r.srq, &wr, &bad_wr), "ibv_post_srq_recv(slot " + std::to_string(slot) + ")");
    //! [post_srq_recv]
}

/** Which connection a completion belongs to: the index of the QP whose number it carries. */
int connection_of(const Receiver &r, const ibv_wc &wc)
{
    for (std::size_t i = 0; i < r.qps.size(); ++i)
        if (r.qps[i]->qp_num == wc.qp_num)
            return static_cast<int>(i);
    return -1;
}

/** Take every completion the CQ holds (poll until empty); print each message and give its slot back. */
std::vector<ibv_wc> take_completions(const Receiver &r)
{
    std::vector<ibv_wc> taken;
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(r.cq, 1, &wc)) > 0) {
        taken.push_back(wc);
        //! [refill]
        if (wc.status == IBV_WC_SUCCESS) { // print the message before its slot is reused, then refill
            const char *msg = r.buf.data() + wc.wr_id * max_message_length;
            result("Got from sender: \"%.*s\", connection %d", static_cast<int>(wc.byte_len), msg,
                   connection_of(r, wc));
            post_srq_receive(r, wc.wr_id); // the slot this message came in goes back to the pool
        }
        //! [refill]
    }
    return taken;
}

/** Arm the SRQ limit: the device raises IBV_EVENT_SRQ_LIMIT_REACHED once fewer than r.limit receives
 *  are left in it. One shot: it disarms itself when it fires. */
void arm_srq_limit(const Receiver &r)
{
    //! [arm_limit]
    ibv_srq_attr attr{};
    attr.srq_limit = r.limit;
    check_rc(ibv_modify_srq(r.srq, &attr, IBV_SRQ_LIMIT),
             "ibv_modify_srq(IBV_SRQ_LIMIT " + std::to_string(r.limit) + ")");
    //! [arm_limit]
}

/** Take the async events already queued, without waiting: print each, re-arm the SRQ limit after its event.
 *  Call it after taking the completions, so that their slots are refilled first. */
void take_async_events(const Receiver &r)
{
    //! [async]
    for_each_async_event(r.ctx, [&](const ibv_async_event &ev) { // taken and acknowledged (async_events.cpp)
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
            info("IBV_EVENT_SRQ_LIMIT_REACHED: fewer than %u receives were left in the SRQ; refilled, re-armed",
                 r.limit);
            arm_srq_limit(r); // one shot: arm it again for the next time
        } else {
            info("async event: %s", async_event_name(ev.event_type));
        }
    });
    //! [async]
}

/**
 * Sleep until there is something to do, at most @p wait_ms: a completion (the channel), an async event
 * (the SRQ limit) or, when @p cm_fd >= 0, an RDMA CM event; rdma_multi_conn's sleep with one more fd.
 * @return true when the CM's channel has an event
 */
bool sleep_on_channel(const Receiver &r, int cm_fd, int wait_ms, std::vector<ibv_wc> &taken)
{
    check_rc(ibv_req_notify_cq(r.cq, 0), "ibv_req_notify_cq"); // arm, then look once more
    taken = take_completions(r);
    if (!taken.empty())
        return false;
    //! [sleep_async]
    pollfd fds[3] = {{r.channel->fd, POLLIN, 0}, {r.ctx->async_fd, POLLIN, 0}, {cm_fd, POLLIN, 0}};
    if (poll(fds, cm_fd >= 0 ? 3 : 2, wait_ms) <= 0)
        return false;
    if (fds[0].revents & POLLIN) {
        ibv_cq *ev_cq = nullptr;
        void *ev_ctx = nullptr;
        check_rc(ibv_get_cq_event(r.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event");
        ibv_ack_cq_events(ev_cq, 1);
        taken = take_completions(r);
    }
    if (fds[1].revents & POLLIN) {
        // The device raises the limit event as it takes a receive, before that message's completion:
        // take the completions first (each refills its slot), then re-arm.
        for (const ibv_wc &wc : take_completions(r))
            taken.push_back(wc);
        take_async_events(r);
    }
    //! [sleep_async]
    return cm_fd >= 0 && (fds[2].revents & POLLIN);
}

/** Mark what the completions taken mean for each client: its message came, or its receive failed. */
void report(const Receiver &r, const std::vector<ibv_wc> &taken, CmClients &clients)
{
    for (const ibv_wc &wc : taken) {
        const int conn = connection_of(r, wc);
        if (conn < 0)
            continue;
        if (clients.mark_established(conn)) // its message overtook the ESTABLISHED event
            result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
        if (wc.status == IBV_WC_SUCCESS)
            clients.mark_done(conn);
        else
            clients.mark_lost(conn, std::string("its receive completed with ") + wc_status_name(wc.status));
    }
}

/** The CM server: rdma_multi_conn_receive's loop, the QPs on the SRQ (chapter 9 walks through it). */
void serve(const Args &args, const Device &dev, const Receiver &r)
{
    CmConnection listener = cm_listen(args.listen_port, static_cast<int>(r.qps.size()));
    CmClients clients(r.qps); // client i gets qps[i]
    info("listening on port %u for %zu senders; waiting up to %d s for each event", args.listen_port, r.qps.size(),
         args.timeout_s);
    Deadline idle(args.timeout_s); // -t bounds the wait for each next event, not the whole service
    while (!clients.all_finished() && !idle.expired()) {
        std::vector<ibv_wc> taken = take_completions(r);
        report(r, taken, clients);
        const bool cm_event = sleep_on_channel(r, listener.channel->fd, idle.left_ms(), taken);
        report(r, taken, clients);
        if (!cm_event)
            continue;
        rdma_cm_event *event = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &event), "rdma_get_cm_event");
        CmEventPtr ev(event);
        idle.restart();
        const int conn = clients.find(ev->id);
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            const int next = clients.admit(ev->id);
            if (next < 0) { // more senders than -nc: refuse (the sender sees REJECTED)
                check_rc(rdma_reject(ev->id, nullptr, 0), "rdma_reject");
                rdma_cm_id *id = ev->id;
                ev.reset();
                rdma_destroy_id(id);
                break;
            }
            check_cm_device(ev->id, dev);
            ibv_qp *qp = r.qps[static_cast<std::size_t>(next)].get();
            cm_ready_qp(ev->id, qp); // RTR, RTS: its receives wait in the SRQ already
            rdma_conn_param param = cm_conn_param(qp);
            check_rc(rdma_accept(ev->id, &param), "rdma_accept");
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            if (conn >= 0 && clients.mark_established(conn))
                result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            if (conn < 0)
                break;
            report(r, take_completions(r), clients); // its message may be in the CQ already
            clients.mark_lost(conn,
                              "the sender went away (" + cm_event_name(ev->event) + ") before its message arrived");
            ev.reset();
            clients.mark_disconnected(conn);
            break;
        default: break;
        }
    }
    report(r, take_completions(r), clients);
    take_async_events(r); // the last messages' limit event, if it is queued already
    clients.finish(listener, args.timeout_s, "sender", "messages arrived",
                   "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc",
                   "a sender stopped early; its output says why");
}

/** Wait for @p n messages (descriptor files): sleep on the channel, check each. */
void wait_for_messages(const Receiver &r, int n, int timeout_s)
{
    const Deadline deadline(timeout_s);
    Completions completions(r.cq);
    for (int got = 0; got < n;) { // any order; take_completions() printed each already
        std::vector<ibv_wc> taken = take_completions(r);
        if (taken.empty() && !deadline.expired())
            sleep_on_channel(r, -1, deadline.left_ms(), taken);
        if (taken.empty() && deadline.expired())
            throw with_async_events(timeout_error(timeout_s, "the messages of " + std::to_string(n) + " connection(s)",
                                                  "is every sender still running? its output says why it stopped"),
                                    r.ctx);
        for (const ibv_wc &wc : taken) {
            completions.check(wc, IBV_WC_RECV, "the message on connection " + std::to_string(connection_of(r, wc)));
            ++got;
        }
    }
    // The last messages' limit event may still be queued: take it now. (rxe raises it as it takes the
    // receive, before the completion; a NIC reports it on its own event queue, in no set order with the CQ.)
    take_async_events(r);
}

/** The flags must fit together, -nc and the device; a bad combination is a usage error (exit 2). */
void check_options(const Args &args, const Options &opt, std::uint32_t size)
{
    const auto n = static_cast<std::uint32_t>(args.num_connections);
    if (args.use_cm && args.server_addr)
        throw UsageError("-sa: rdma_srq_receive is a server only (an SRQ pays off across many connections)",
                         "drop -sa; for a receiving client see rdma_multi_conn_receive -cm -sa ADDR");
    if (size < n) // every sender SENDs at once: each needs a receive waiting, or it meets RNR NAKs
        throw UsageError("--srq-size " + std::to_string(size) + " is smaller than one message per connection (-nc " +
                             std::to_string(n) + ")",
                         "pass --srq-size " + std::to_string(n) +
                             " or more; --srq-hold-ms shows what an empty SRQ does to senders");
    if (opt.limit > size)
        throw UsageError("--srq-limit " + std::to_string(opt.limit) + " is larger than the SRQ (" +
                             std::to_string(size) + " receives)",
                         "pass --srq-limit " + std::to_string(size) + " or less");
    if (opt.hold_ms && args.use_cm)
        throw UsageError("--srq-hold-ms works with descriptor files only", "drop -cm");
}

void run(const Args &args, const Options &opt)
{
    const int n = args.num_connections;
    const std::uint32_t size = opt.size ? opt.size : static_cast<std::uint32_t>(n);
    check_options(args, opt, size);

    step(1, "open an RDMA device, allocate a protection domain, read its SRQ limits");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());
    ibv_device_attr attr{};
    check_rc(ibv_query_device(dev.ctx.get(), &attr), "ibv_query_device");
    attr.max_srq = test_control_int(TestHook::max_srq, attr.max_srq); // (the tests play a device without SRQs)
    if (attr.max_srq == 0)
        throw UsageError("device " + dev.name + " has no shared receive queues (max_srq 0)",
                         "use rdma_multi_conn_receive: each QP then posts its own receives");
    if (size > static_cast<std::uint32_t>(attr.max_srq_wr))
        throw UsageError("--srq-size " + std::to_string(size) + ": device " + dev.name + " allows at most " +
                             std::to_string(attr.max_srq_wr) + " receives in an SRQ (max_srq_wr)",
                         "pass --srq-size " + std::to_string(attr.max_srq_wr) + " or less");
    info("device limits: max_srq %d, max_srq_wr %d", attr.max_srq, attr.max_srq_wr);

    step(2, "register one buffer with a %zu-byte slot per SRQ receive (%u), local write only", max_message_length,
         size);
    //! [memory]
    // Without an SRQ every QP needs its own receives: N connections x depth x size, posted per QP and
    // idle on every quiet connection. With one SRQ the pool is sized for what arrives at once.
    info("receive memory without an SRQ: %d connection(s) x 1 receive x %zu bytes = %zu bytes", n, max_message_length,
         static_cast<std::size_t>(n) * max_message_length);
    info("receive memory with one SRQ:   %u receives x %zu bytes = %zu bytes, shared by all %d", size,
         max_message_length, static_cast<std::size_t>(size) * max_message_length, n);
    //! [memory]
    Buffer buf(static_cast<std::size_t>(size) * max_message_length);
    // DOCA's table: local read/write. The device writes each message into a slot, a local write on our
    // behalf; SEND/RECEIVE is two-sided, so no remote access at all.
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion channel, one completion queue, one shared receive queue and %d RC queue pair(s)", n);
    //! [qps]
    // The CQ takes every QP's sends (2 each: see cq_entries) and every receive the SRQ can hand out.
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    const QpCaps caps{.max_send_wr = 2, .max_recv_wr = 0};
    const int cq_size = n * cq_entries(caps) + static_cast<int>(size);
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_size, nullptr, channel.get(), 0), "ibv_create_cq"));
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = size; // the pool: receives waiting for any of the QPs
    srq_attr.attr.max_sge = 1;
    SrqPtr srq(check(ibv_create_srq(pd.get(), &srq_attr), "ibv_create_srq(max_wr " + std::to_string(size) + ")"));
    std::vector<QpPtr> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(create_rc_qp(pd.get(), cq.get(), caps, srq.get())); // no receive queue of its own
        qp_to_init(qps.back().get(), dev, 0);                             // receive-only: nothing remote
    }
    //! [qps]
    info("QPNs 0x%06x ... 0x%06x", qps.front()->qp_num, qps.back()->qp_num);
    const Receiver r{dev.ctx.get(), cq.get(), channel.get(), srq.get(), opt.limit ? opt.limit : (size + 1) / 2,
                     qps,           buf,      mr.get()};

    if (opt.hold_ms == 0) {
        step(4, "post %u receives into the SRQ, arm its limit at %u", size, r.limit);
        for (std::uint32_t i = 0; i < size; ++i)
            post_srq_receive(r, i);
        arm_srq_limit(r);
    } else {
        step(4, "demonstration: leave the SRQ empty for %d ms after the senders connect", opt.hold_ms);
    }

    if (args.use_cm) {
        step(5, "serve %d senders with RDMA CM on port %u: accept each, print its message as it arrives", n,
             args.listen_port);
        serve(args, dev, r);
        return;
    }
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
    if (opt.hold_ms > 0) { // every SEND that comes now finds the SRQ empty: RNR NAK
        std::this_thread::sleep_for(std::chrono::milliseconds(opt.hold_ms));
        info("posting %u receives into the SRQ only now", size);
        for (std::uint32_t i = 0; i < size; ++i)
            post_srq_receive(r, i);
    }
    step(6, "sleep on the completion channel until %d message(s) arrived", n);
    wait_for_messages(r, n, args.timeout_s);
    step(7, "keep the QPs a moment: if an ACK of ours was lost, its sender resends the message");
    std::this_thread::sleep_for(std::chrono::milliseconds(retransmit_window_ms(qps[0].get()))); // (rdma_multi_conn)
} // the QPs (all of them), the SRQ, cq, channel, mr, pd and the device close here

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_srq_receive",
                     .role = "receiver",
                     .summary =
                         "A shared receive queue: N RC QPs take their receives from one pool; print each message.",
                     .resource_descriptor = false,
                     .multi_conn = true,
                     .rdma_cm = true};
    spec.extra.push_back({"srq-size", "N", "receives in the SRQ, refilled as messages arrive (perftest: --rx-depth)",
                          "one per connection", [&](const std::string &v) {
                              opt.size = static_cast<std::uint32_t>(parse_number("--srq-size", v, 1, 1u << 24));
                          }});
    spec.extra.push_back({"srq-limit", "N", "arm IBV_EVENT_SRQ_LIMIT_REACHED for when fewer than N receives are left",
                          "half the SRQ", [&](const std::string &v) {
                              opt.limit = static_cast<std::uint32_t>(parse_number("--srq-limit", v, 1, 1u << 24));
                          }});
    spec.extra.push_back({"srq-hold-ms", "MS",
                          "demonstration: keep the SRQ empty this long after the senders "
                          "connect, so their SENDs meet RNR NAKs (descriptor files only)",
                          "", [&](const std::string &v) {
                              opt.hold_ms = static_cast<int>(parse_number("--srq-hold-ms", v, 1, 60000));
                          }});
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
