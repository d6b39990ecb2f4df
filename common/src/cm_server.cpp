/** @file cm_server.cpp @brief The bookkeeping of an RDMA CM server for many clients: who has which QP, disconnects, tally. */
#include "cm_internal.hpp"

#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdma_samples {

//! [refuse_request]
void refuse_request(rdma_cm_id *id, const std::string &reason)
{
    CmIdPtr request(id); // a request's cm_id is ours to destroy, whatever rdma_reject() says
    const auto len = static_cast<std::uint8_t>(reason.empty() ? 0 : std::min(reason.size() + 1, max_reject_reason));
    const std::string data = reason.substr(0, len == 0 ? 0 : len - 1u);
    // Best effort: a client that gave up its request meanwhile (its REJ came before ours) has nobody left
    // to tell, and rdma_reject() fails (EINVAL); that is no reason to stop serving the others.
    if (rdma_reject(id, len == 0 ? nullptr : data.c_str(), len) != 0)
        info("rdma_reject: %s: the client gave up its request before we refused it", std::strerror(errno));
}
//! [refuse_request]

void refuse_request(CmEventPtr &ev, const std::string &reason)
{
    rdma_cm_id *id = ev->id;
    ev.reset(); // acknowledged before its id is destroyed
    refuse_request(id, reason);
}

CmClients::CmClients(const std::vector<QpPtr> &qps) : clients_(qps.size())
{
    for (std::size_t i = 0; i < qps.size(); ++i)
        clients_[i].qp = qps[i].get();
}

int CmClients::admit(rdma_cm_id *id)
{
    if (arrived_ == static_cast<int>(clients_.size()))
        return -1;
    const int conn = arrived_++;
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    c.id.reset(id);
    c.addr = addr_to_string(rdma_get_peer_addr(id));
    return conn;
}

int CmClients::find(const rdma_cm_id *id) const
{
    for (std::size_t i = 0; i < clients_.size(); ++i)
        if (clients_[i].id.get() == id)
            return static_cast<int>(i);
    return -1;
}

void CmClients::mark_disconnected(int conn)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    c.disconnected = true;
    answer_if_finished(c);
}

bool CmClients::mark_established(int conn)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    if (c.established)
        return false;
    c.established = true;
    return true;
}

void CmClients::answer_if_finished(CmClient &c)
{
    if (c.disconnected && !c.answered && (c.done || !c.lost.empty()))
        answer_dreq(c);
}

void CmClients::answer_dreq(CmClient &c)
{
    rdma_disconnect(c.id.get()); // our DREP; the client waits for it (bounded by its -t)
    c.answered = true;
    // Then let the cm_id go (its QP is ours and stays), as cm_disconnect() does and for its reason: a
    // DREQ resent because this DREP was lost is answered by the kernel only in TIMEWAIT or for a cm_id
    // that is gone, and this server lives on to serve the others.
    c.id.reset();
}

void CmClients::mark_done(int conn)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    c.done = true;
    answer_if_finished(c);
}

void CmClients::mark_lost(int conn, const std::string &why)
{
    CmClient &c = clients_[static_cast<std::size_t>(conn)];
    if (!c.done && c.lost.empty()) {
        c.lost = why;
        info("connection %d lost: %s", conn, why.c_str());
    }
    answer_if_finished(c);
}

bool CmClients::all_finished() const
{
    for (const auto &c : clients_)
        if (!c.done && c.lost.empty())
            return false;
    return true;
}

void CmClients::finish(CmConnection &listener, int timeout_s, const std::string &peer, const std::string &outcome,
                       const std::string &hint_missing, const std::string &hint_failed)
{
    const Deadline deadline(timeout_s);
    // Take one CM event while the service winds down: a DREQ is answered, a late client refused.
    const auto take_event = [&] {
        CmEventPtr ev = next_cm_event(listener.channel.get(), deadline);
        if (!ev)
            return false;
        const int i = find(ev->id);
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED && i >= 0 && !clients_[static_cast<std::size_t>(i)].disconnected) {
            ev.reset(); // acknowledged first: answering destroys its cm_id
            mark_disconnected(i);
        } else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            refuse_request(ev); // a late client
        }
        return true;
    };
    // A client whose message went through disconnects by itself, once its side is acknowledged: wait
    // for those DREQs first (bounded by -t). Disconnecting it ourselves now would send our DREQ across
    // its own, and would stop our QP while it may still resend a message whose ACK was lost.
    const auto expected_dreqs = [&] {
        int n = 0;
        for (const auto &c : clients_)
            n += (c.id && c.established && c.done && !c.disconnected) ? 1 : 0;
        return n;
    };
    while (expected_dreqs() > 0 && take_event()) {
    }
    // Then disconnect every client still connected (one that failed, or never sent its DREQ) and wait
    // (bounded) until the CM confirms each.
    for (auto &c : clients_) {
        if (!c.id || c.answered)
            continue;
        if (c.disconnected) { // its DREQ came: our DREP
            answer_dreq(c);
            continue;
        }
        c.answered = true; // our DREQ; the client answers
        if (rdma_disconnect(c.id.get()) != 0 || !c.established)
            c.disconnected = true; // already gone: nothing to wait for
    }
    const auto still_waiting = [&] {
        int n = 0;
        for (const auto &c : clients_)
            n += (c.id && c.established && !c.disconnected) ? 1 : 0;
        return n;
    };
    // (the work is done; a peer that does not confirm its disconnect changes nothing)
    while (still_waiting() > 0 && take_event()) {
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
        throw Error("timed out after " + std::to_string(timeout_s) + " s without a new " + peer + ": " + counts,
                    hint_missing);
    throw Error(counts, hint_failed);
}

} // namespace rdma_samples
