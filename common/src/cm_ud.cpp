/** @file cm_ud.cpp @brief RDMA CM on RDMA_PS_UDP: the SIDR lookup of a server's UD QP (udaddy's way). */
#include "cm_internal.hpp"

#include <rdma_samples/cm_ud.hpp>
#include <rdma_samples/log.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

namespace rdma_samples {

namespace {

/** One try: address, route, SIDR REQ. The answer, or nothing when nobody listens (yet). */
std::optional<CmUdPeer> lookup_once(SockAddr dst, const std::string &peer, const Deadline &deadline, const Device &dev,
                                    const ibv_qp *qp)
{
    CmUdPeer p;
    p.cm.peer = peer;
    p.cm.channel = create_event_channel();
    rdma_cm_id *id = nullptr;
    check_rc(rdma_create_id(p.cm.channel.get(), &id, nullptr, RDMA_PS_UDP), "rdma_create_id(RDMA_PS_UDP)");
    p.cm.id.reset(id);
    check_rc(rdma_resolve_addr(id, nullptr, dst.get(), std::max(deadline.left_ms(), 1)),
             "rdma_resolve_addr(" + peer + ")", [](int) -> std::string {
                 return "check the address and -sat; it must be reachable through an RDMA device's interface";
             });
    expect_cm_event(p.cm.channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "the address of " + peer, peer);
    check_cm_device(id, dev);
    check_rc(rdma_resolve_route(id, std::max(deadline.left_ms(), 1)), "rdma_resolve_route(" + peer + ")");
    expect_cm_event(p.cm.channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "a route to " + peer, peer);

    rdma_conn_param param{};
    param.qp_num = qp->qp_num; // our own QP: the server learns it only from our datagrams anyway
    check_rc(rdma_connect(id, &param), "rdma_connect(SIDR request)");
    CmEventPtr ev = next_cm_event(p.cm.channel.get(), deadline);
    if (!ev || ev->event == RDMA_CM_EVENT_UNREACHABLE)
        return std::nullopt; // nobody listens on the port (yet), or no answer
    if (ev->event != RDMA_CM_EVENT_ESTABLISHED || ev->status != 0)
        throw cm_event_error(*ev, "the server's answer (SIDR reply)", peer);
    //! [ud_param]
    // The answer: how to address the server's UD QP. ah_attr is the address vector (is_global, the
    // server's GID, our GID index, port): what ibv_create_ah() takes. qp_num and qkey go into every
    // SEND's wr.ud. This is all udaddy's client keeps from the event.
    p.ah_attr = ev->param.ud.ah_attr;
    p.qp_num = ev->param.ud.qp_num;
    p.qkey = ev->param.ud.qkey;
    //! [ud_param]
    return p;
}

} // namespace

CmUdPeer cm_ud_connect(const CmServerAddr &server, int timeout_s, const Device &dev, const ibv_qp *qp)
{
    SockAddr dst = parse_server_addr(server.addr, server.type, server.port);
    const std::string peer = addr_to_string(dst.get());
    const Deadline deadline(timeout_s);
    for (int attempt = 1;; ++attempt) {
        if (std::optional<CmUdPeer> p = lookup_once(dst, peer, deadline, dev, qp)) {
            info("RDMA CM: %s answered through %s port %u: QPN 0x%06x, Q_Key 0x%08x", peer.c_str(),
                 ibv_get_device_name(p->cm.id->verbs->device), p->cm.id->port_num, p->qp_num, p->qkey);
            return std::move(*p);
        }
        if (deadline.expired())
            throw timeout_error(timeout_s, "the UD server at " + peer + " to answer (SIDR reply)",
                                "is the receiver running with -cm and the same -lp on " + peer +
                                    "? raise -t if it is just slow");
        if (attempt == 1)
            info("nobody answers on %s yet; trying again for up to %d s", peer.c_str(), timeout_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, deadline.left_ms())));
    }
}

CmConnection cm_ud_accept(std::uint16_t port, int timeout_s, const Device &dev, const ibv_qp *qp)
{
    CmConnection c = cm_listen(port, 1, RDMA_PS_UDP);
    info("listening on port %u (RDMA_PS_UDP); waiting up to %d s for the sender (the side with -sa)", port, timeout_s);
    CmEventPtr req = expect_cm_event(c.channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, timeout_s,
                                     "a sender's lookup (SIDR request)", c.peer);
    c.id.reset(req->id); // the request's new cm_id: ours to destroy
    c.peer = addr_to_string(rdma_get_peer_addr(req->id));
    check_cm_device(req->id, dev);
    // The SIDR reply carries our QPN and the port space's Q_Key (RDMA_UDP_QKEY); no ESTABLISHED follows.
    rdma_conn_param param{};
    param.qp_num = qp->qp_num;
    check_rc(rdma_accept(req->id, &param), "rdma_accept(SIDR reply)");
    info("RDMA CM: answered %s with QPN 0x%06x", c.peer.c_str(), qp->qp_num);
    return c;
}

int cm_ud_answer_again(CmConnection &c, const ibv_qp *qp)
{
    int answered = 0;
    while (cm_event_ready(c.channel.get(), 0)) {
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(c.channel.get(), &raw), "rdma_get_cm_event");
        CmEventPtr ev(raw);
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            continue;
        rdma_cm_id *id = ev->id;
        ev.reset(); // acknowledged first: rdma_destroy_id() waits until its id's events are acknowledged
        CmIdPtr request(id);
        rdma_conn_param param{};
        param.qp_num = qp->qp_num;
        check_rc(rdma_accept(request.get(), &param), "rdma_accept(SIDR reply, again)");
        ++answered;
    }
    return answered;
}

} // namespace rdma_samples
