/**
 * @file multi_receive.cpp
 * @brief The receivers of many connections: descriptor files for N QPs, and the CM server's switch.
 */
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/multi_receive.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <string>
#include <utility>

namespace rdma_samples {

int connection_of(const std::vector<QpPtr> &qps, const ibv_wc &wc)
{
    for (std::size_t i = 0; i < qps.size(); ++i)
        if (qps[i]->qp_num == wc.qp_num)
            return static_cast<int>(i);
    return -1;
}

void connect_by_files(const Args &args, const Device &dev, const std::vector<QpPtr> &qps)
{
    for (std::size_t i = 0; i < qps.size(); ++i) {
        const int n = static_cast<int>(i);
        const ConnectionDescriptor remote = wait_for_connection_descriptor(
            {numbered_path(args.remote_descriptor_path, n), "the sender (rdma_multi_conn_send)", args.timeout_s, {}});
        const std::uint32_t psn = random_psn();
        qp_to_rtr(qps[i].get(), dev, remote);
        qp_to_rts(qps[i].get(), psn);
        ConnectionDescriptor local = describe_qp(qps[i].get(), dev, psn, new_nonce());
        local.peer_nonce = remote.nonce;
        write_descriptor_file(numbered_path(args.local_descriptor_path, n), format_descriptor(local));
    }
}

void report_completions(const std::vector<QpPtr> &qps, const std::vector<ibv_wc> &taken, CmClients &clients)
{
    for (const ibv_wc &wc : taken) {
        const int conn = connection_of(qps, wc);
        if (conn < 0)
            continue;
        if (clients.mark_established(conn)) // its message overtook the ESTABLISHED event: the connection is up
            result("connection %d established from %s", conn, clients.client(conn).addr.c_str());
        if (wc.status == IBV_WC_SUCCESS)
            clients.mark_done(conn);
        else
            clients.mark_lost(conn, std::string("its receive completed with ") + wc_status_name(wc.status));
    }
}

void serve_cm_event(CmEventPtr ev, CmClients &clients, const Device &dev, const std::vector<QpPtr> &qps)
{
    const int conn = clients.find(ev->id);
    //! [server_switch]
    switch (ev->event) {
    case RDMA_CM_EVENT_CONNECT_REQUEST: { // a sender's REQ, with a new cm_id for its connection
        const int next = clients.admit(ev->id);
        if (next < 0) { // more senders than -nc: refuse (the sender sees REJECTED)
            refuse_request(ev);
            break;
        }
        check_cm_device(ev->id, dev);
        ibv_qp *qp = qps[static_cast<std::size_t>(next)].get();
        cm_ready_qp(ev->id, qp); // RTR, RTS: its receive waits already
        rdma_conn_param param = cm_conn_param(qp);
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
        clients.mark_lost(conn, "the sender went away (" + cm_event_name(ev->event) + ") before its message arrived");
        ev.reset();                      // acknowledged before its cm_id goes (answering destroys it)
        clients.mark_disconnected(conn); // answered (DREP) now that its connection is finished
        break;
    default: // TIMEWAIT_EXIT and the like: nothing to do
        break;
    }
    //! [server_switch]
}

MessageCount::MessageCount(ibv_cq *cq, const std::vector<QpPtr> &qps, int n, int timeout_s, std::string what,
                           ibv_context *ctx)
    : completions_(cq), qps_(qps), n_(n), timeout_s_(timeout_s), deadline_(timeout_s), what_(std::move(what)), ctx_(ctx)
{}

void MessageCount::count(const std::vector<ibv_wc> &taken)
{
    if (taken.empty() && deadline_.expired())
        throw with_async_events(
            timeout_error(timeout_s_, what_, "is every sender still running? its output says why it stopped"), ctx_);
    for (const ibv_wc &wc : taken) {
        completions_.check(wc, IBV_WC_RECV, "the message on connection " + std::to_string(connection_of(qps_, wc)));
        ++got_;
    }
}

SenderServer::SenderServer(const Args &args, const Device &dev, const std::vector<QpPtr> &qps)
    : args_(args), dev_(dev), qps_(qps), listener_(cm_listen(dev, args.listen_port, static_cast<int>(qps.size()))),
      clients_(qps), idle_(args.timeout_s)
{
    info("listening on port %u for %zu senders; waiting up to %d s for each event", args.listen_port, qps.size(),
         args.timeout_s);
}

CmEventPtr SenderServer::next_event()
{
    rdma_cm_event *event = nullptr;
    check_rc(rdma_get_cm_event(listener_.channel.get(), &event), "rdma_get_cm_event");
    idle_.restart(); // progress: -t again
    return CmEventPtr(event);
}

bool SenderServer::ends_connection(const rdma_cm_event &ev)
{
    return ev.event != RDMA_CM_EVENT_CONNECT_REQUEST && ev.event != RDMA_CM_EVENT_ESTABLISHED;
}

void SenderServer::finish()
{
    clients_.finish(listener_, args_.timeout_s, "sender", "messages arrived",
                    "start the missing senders (rdma_multi_conn_send -cm -sa ADDR) within -t, or lower -nc",
                    "a sender stopped early; its output says why");
}

} // namespace rdma_samples
