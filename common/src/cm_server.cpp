/** @file cm_server.cpp @brief An RDMA CM server for many clients: accept, track, disconnect, tally. */
#include "cm_internal.hpp"

#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

namespace rdma_samples {

namespace {

/** Refuse a connection request the server has no QP for (the client sees REJECTED). */
void reject_request(CmEventPtr request)
{
    rdma_cm_id *id = request->id;
    check_rc(rdma_reject(id, nullptr, 0), "rdma_reject");
    request.reset(); // acknowledge the event before destroying its id
    rdma_destroy_id(id);
}

int find_client(const std::vector<CmClient> &clients, const rdma_cm_id *id)
{
    for (std::size_t i = 0; i < clients.size(); ++i)
        if (clients[i].id.get() == id)
            return static_cast<int>(i);
    return -1;
}

} // namespace

CmServer::CmServer(const Args &args, const Device &dev, const std::vector<QpPtr> &qps)
    : listener_(cm_listen(args, static_cast<int>(qps.size()))), dev_(dev), clients_(qps.size()),
      timeout_s_(args.timeout_s)
{
    for (std::size_t i = 0; i < qps.size(); ++i)
        clients_[i].qp = qps[i].get();
}

CmServerEvent CmServer::next(int wait_ms)
{
    CmEventPtr ev = next_cm_event(listener_.channel.get(), Deadline::in_ms(wait_ms));
    if (!ev)
        return {};
    const int i = find_client(clients_, ev->id);
    const std::string name = cm_event_name(ev->event);
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (arrived_ == static_cast<int>(clients_.size())) { // more clients than -nc: refuse
            reject_request(std::move(ev));
            return {};
        }
        const int conn = arrived_++;
        CmClient &c = clients_[static_cast<std::size_t>(conn)];
        c.id.reset(ev->id); // a connection request comes with a new cm_id: ours to destroy
        c.addr = addr_to_string(rdma_get_peer_addr(ev->id));
        check_cm_device(ev->id, dev_);
        // Its receives are posted already: ready to receive (RTR, RTS), then accept.
        cm_ready_qp(ev->id, c.qp);
        rdma_conn_param param = cm_conn_param(c.qp);
        check_rc(rdma_accept(ev->id, &param), "rdma_accept");
        return {CmServerEvent::Kind::accepted, conn, name};
    }
    if (i < 0)
        return {};
    if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
        return mark_established(i) ? CmServerEvent{CmServerEvent::Kind::established, i, name} : CmServerEvent{};
    if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
        ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_REJECTED) {
        // Answered (DREP) in answer_if_finished(): the client that received our last message may
        // disconnect before our SEND's ACK came back; if that ACK was lost, we resend, and only a
        // client that still waits for our DREP keeps its QP to acknowledge it.
        clients_[static_cast<std::size_t>(i)].disconnected = true;
        answer_if_finished(clients_[static_cast<std::size_t>(i)]);
        return {CmServerEvent::Kind::gone, i, name};
    }
    return {};
}

bool CmServer::mark_established(int conn)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    if (c.established)
        return false;
    c.established = true;
    return true;
}

void CmServer::answer_if_finished(CmClient &c)
{
    if (c.disconnected && !c.answered && (c.done || !c.lost.empty())) {
        rdma_disconnect(c.id.get()); // our DREP; the client waits for it (bounded by its -t)
        c.answered = true;
    }
}

void CmServer::mark_done(int conn)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    c.done = true;
    answer_if_finished(c);
}

void CmServer::mark_lost(int conn, const std::string &why)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    if (!c.done && c.lost.empty()) {
        c.lost = why;
        info("connection %d lost: %s", conn, why.c_str());
    }
    answer_if_finished(c);
}

bool CmServer::all_finished() const
{
    for (const auto &c : clients_)
        if (!c.done && c.lost.empty())
            return false;
    return true;
}

void CmServer::finish(const std::string &peer, const std::string &outcome, const std::string &hint_missing,
                      const std::string &hint_failed)
{
    // Answer every client that asked to disconnect; disconnect every other one still connected and
    // wait (bounded) until the CM confirms each.
    int waiting = 0;
    for (auto &c : clients_) {
        if (!c.id || c.answered)
            continue;
        const bool ours = !c.disconnected; // we send the DREQ, the client answers
        c.answered = true;
        if (rdma_disconnect(c.id.get()) == 0 && ours && c.established)
            ++waiting;
        else
            c.disconnected = true; // answered, or already gone
    }
    const Deadline deadline(timeout_s_);
    while (waiting > 0) {
        CmEventPtr ev = next_cm_event(listener_.channel.get(), deadline);
        if (!ev)
            break; // the work is done; a peer that does not confirm its disconnect changes nothing
        const int i = find_client(clients_, ev->id);
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED && i >= 0 && !clients_[static_cast<std::size_t>(i)].disconnected) {
            clients_[static_cast<std::size_t>(i)].disconnected = true;
            --waiting;
        } else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            reject_request(std::move(ev));
        }
    }
    // rdma_disconnect() leaves QPs of our own alone: stop each one (any receive still posted is flushed).
    for (auto &c : clients_)
        qp_to_error(c.qp);

    const int n = static_cast<int>(clients_.size());
    int ok = 0;
    std::string lost;
    for (int i = 0; i < arrived_; ++i) {
        const CmClient &c = clients_[static_cast<std::size_t>(i)];
        ok += c.done ? 1 : 0;
        if (!c.done)
            lost += " connection " + std::to_string(i) + " (" + (c.lost.empty() ? "no completion" : c.lost) + ");";
    }
    if (ok == n)
        return;
    const std::string counts = std::to_string(arrived_) + " of " + std::to_string(n) + " " + peer + "s connected, " +
                               std::to_string(ok) + " of " + std::to_string(n) + " " + outcome +
                               (lost.empty() ? "" : "; lost:" + lost);
    if (arrived_ < n)
        throw Error("timed out after " + std::to_string(timeout_s_) + " s without a new " + peer + ": " + counts,
                    hint_missing);
    throw Error(counts, hint_failed);
}

} // namespace rdma_samples
