/**
 * @file server.cpp
 * @brief An RDMA CM echo server for many clients: one process, one thread, one epoll.
 *
 * Every source of work is a file descriptor in one epoll: the RDMA CM event channel (clients come and
 * go), the completion channel (messages), the device's async fd (a QP that broke), a timerfd (the
 * nearest deadline: a client idle for -t, a drain that takes too long) and a signalfd (SIGINT,
 * SIGTERM). epoll_wait() sleeps until one of them has input; nothing is polled in a spin.
 *
 * One completion channel and one CQ serve every connection: one fd in the epoll however many clients
 * there are, one arm per wake-up, and a CQ sized once for --max-clients x (receives + sends). A
 * completion finds its connection by its wr_id. (One CQ per connection, all on one channel, is the
 * other design: ibv_get_cq_event() says which CQ fired, each is armed on its own, and an overrun hurts
 * only that connection; it costs a CQ per client.) Credits: each connection has --credits receives
 * posted, so a client may have that many messages out; the receive is posted again before its echo
 * leaves (echo.hpp). Chapter 16 walks through it.
 */
#include "handlers.hpp"

#include <rdma_samples/device.hpp>
#include <rdma_samples/run_sample.hpp>

#include <sys/epoll.h>

using namespace rdma_samples;
using namespace rdma_event_loop;

namespace {

/** The nearest deadline: a connection's (idle, or its drain), or, with --clients and nobody
 *  connected, the end of the wait for the next client. */
Clock::time_point nearest_deadline(const Server &server, Clock::time_point quiet_until, bool &any)
{
    Clock::time_point when = Clock::time_point::max();
    for (const Connection &conn : server.table)
        if (conn.id)
            when = std::min(when, conn.deadline);
    if (server.open == 0 && server.opt.clients > 0)
        when = std::min(when, quiet_until);
    any = when != Clock::time_point::max();
    return when;
}

void run(const Args &args, const ServerOptions &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    const std::size_t slots = static_cast<std::size_t>(opt.max_clients) * 2 * static_cast<std::size_t>(opt.credits);
    step(2, "register one buffer for %d clients x %d credits x 2 (receive, echo) x %d bytes, local write only",
         opt.max_clients, opt.credits, opt.message_size);
    Buffer buf(slots * static_cast<std::size_t>(opt.message_size));
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create one completion channel (non-blocking) and one CQ of %zu entries for every client", slots);
    //! [channel]
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    set_nonblocking(channel->fd, "the completion channel"); // ibv_get_cq_event() must not sleep: epoll does
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), static_cast<int>(slots), nullptr, channel.get(), 0), "ibv_create_cq"));
    check_rc(ibv_req_notify_cq(cq.get(), 0), "ibv_req_notify_cq"); // armed before any client can come
    //! [channel]

    step(4, "listen with RDMA CM on port %u; one epoll over the CM, completion, async, timer and signal fds",
         args.listen_port);
    CmConnection listener = cm_listen(dev, args.listen_port, opt.max_clients);
    //! [epoll]
    Fd ep(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
    Fd timer(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create");
    Fd signals(signal_fd(), "signalfd");
    set_nonblocking(dev.ctx->async_fd, "the device's async fd"); // ibv_get_async_event() too
    const int cm_fd = listener.channel->fd;                      // (non-blocking: cm_listen() made it so)
    watch(ep, cm_fd, "the RDMA CM channel");
    watch(ep, channel->fd, "the completion channel");
    watch(ep, dev.ctx->async_fd, "the async fd");
    watch(ep, timer.get(), "the timerfd");
    watch(ep, signals.get(), "the signalfd");
    //! [epoll]
    info("listening on port %u for %s; up to %d at once, %d credits each, receives of %d bytes", args.listen_port,
         opt.clients > 0 ? (std::to_string(opt.clients) + " clients").c_str() : "clients until SIGINT or SIGTERM",
         opt.max_clients, opt.credits, opt.message_size);

    step(5, "serve: sleep in epoll_wait() until a client, a completion, a deadline or a signal comes");
    Server server{.args = args,
                  .opt = opt,
                  .pd = pd.get(),
                  .cq = cq.get(),
                  .buf = buf,
                  .mr = mr.get(),
                  .table = std::vector<Connection>(opt.max_clients)};
    bool stopping = false;
    Clock::time_point quiet_until = Clock::now() + std::chrono::seconds(args.timeout_s);
    //! [loop]
    while (!stopping || server.open > 0) {
        bool armed = false;
        const Clock::time_point when = nearest_deadline(server, quiet_until, armed);
        arm_timer(timer, when, armed); // one timer for all deadlines: the nearest one
        epoll_event ready[8];
        const int n = epoll_wait(ep.get(), ready, 8, -1); // sleeps: no timeout, the timerfd is the clock
        if (n < 0 && errno != EINTR)
            fail_errno("epoll_wait", errno);
        for (int i = 0; i < n; ++i) {
            const int fd = ready[i].data.fd;
            char drained[128];
            if (fd == cm_fd) {
                on_cm_events(server, dev, listener.channel.get(), stopping);
                quiet_until = Clock::now() + std::chrono::seconds(args.timeout_s);
            } else if (fd == channel->fd) {
                on_cq_events(server, channel.get());
            } else if (fd == dev.ctx->async_fd) {
                on_async_events(server, dev.ctx.get());
            } else if (fd == timer.get() && drain_fd(fd, drained, sizeof drained) > 0) {
                on_deadlines(server);
            } else if (fd == signals.get() && drain_fd(fd, drained, sizeof drained) > 0 && !stopping) {
                info("SIGINT or SIGTERM: refusing new clients, closing the %d connected", server.open);
                stopping = true;
            }
        }
        if (opt.clients > 0 && server.served >= opt.clients)
            stopping = true; // served what was asked (--clients): close whoever came beyond it
        for (Connection &conn : server.table)
            if (stopping && conn.id)
                begin_close(server, conn, Ending::dropped, "dropped: the server is shutting down");
        if (!stopping && server.open == 0 && opt.clients > 0 && Clock::now() >= quiet_until)
            throw timeout_error(
                args.timeout_s,
                "a client: served " + std::to_string(server.served) + " of " + std::to_string(opt.clients),
                "start the missing clients (rdma_event_loop_client -sa ADDR) within -t, or lower --clients");
    }
    //! [loop]
    step(6, "all connections closed: every QP drained and destroyed, every cm_id destroyed");
    result("Served %d client(s): %d finished, %d dropped; %lld message(s) echoed; at most %d connected at once",
           server.served, server.served - server.dropped, server.dropped, server.echoed, server.most_open);
} // the table's QPs are gone already; cq, channel, mr, pd, the listener and the device close here

} // namespace

int main(int argc, char **argv)
{
    ServerOptions opt;
    ProgramSpec spec = server_spec(opt);
    refuse_descriptor_files(spec);
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
