/** @file cm.cpp @brief RDMA CM: listen, connect, accept, disconnect; the QP attributes the CM negotiates. */
#include "cm_internal.hpp"

#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <arpa/inet.h>

#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace rdma_samples {

namespace {

std::string loopback_hint()
{
    return "RDMA CM cannot use 127.0.0.1 or ::1 on RoCE (the kernel resolves loopback addresses only on InfiniBand); "
           "use the IP address of the network interface the RDMA device is bound to (rdma link show; ip addr)";
}

/** The private data @p ev carries, copied out (as many bytes as the event gives) before it is acknowledged. */
std::vector<std::uint8_t> private_data_of(const rdma_cm_event &ev)
{
    const auto *data = static_cast<const std::uint8_t *>(ev.param.conn.private_data);
    if (data == nullptr)
        return {};
    return {data, data + ev.param.conn.private_data_len};
}

} // namespace

void check_cm_device(const rdma_cm_id *id, const Device &dev)
{
    const std::string cm_dev = ibv_get_device_name(id->verbs->device);
    if (cm_dev != dev.name || id->port_num != dev.port)
        throw Error("RDMA CM reaches the peer through " + cm_dev + " port " + std::to_string(id->port_num) +
                        ", but this side opened " + dev.name + " port " + std::to_string(dev.port),
                    "pass -d " + cm_dev + " so that the QP lives on the device the CM uses");
}

rdma_conn_param cm_conn_param(const ibv_qp *qp, int responder_resources, int initiator_depth)
{
    rdma_conn_param p{};
    p.qp_num = qp->qp_num; // our own QP (not rdma_create_qp's): tell the CM its number
    p.responder_resources = static_cast<std::uint8_t>(responder_resources); // READs/atomics the peer may have at us
    p.initiator_depth = static_cast<std::uint8_t>(initiator_depth);         // ... and we at the peer
    p.retry_count = rc_retry_cnt;     // 6: on Soft-RoCE 7 would retry forever (see rc_qp.hpp)
    p.rnr_retry_count = rc_rnr_retry; // 6, not 7: 7 means "forever" for RNR (IBTA)
    p.flow_control = 1;
    return p;
}

void cm_ready_qp(rdma_cm_id *id, ibv_qp *qp, int responder_resources, int initiator_depth)
{
    //! [cm_ready_qp]
    // iWARP: nothing to do. The reliable transport is TCP, so there is no PSN, ACK timeout or retry
    // count to set, and the kernel's iWARP CM moves the QP to RTS itself once the TCP connection and the
    // MPA handshake are up (for RTS, rdma_init_qp_attr() gives a mask without IBV_QP_STATE: iwcm.c,
    // iwcm_init_qp_rts_attr() sets none, cma.c adds the port). A QP already at RTS would even be
    // refused: siw accepts only a QP at INIT or RTR (siw_cm.c, siw_accept()), and refuses RTS from us
    // for want of a socket (siw_qp.c).
    if (qp->context->device->transport_type == IBV_TRANSPORT_IWARP)
        return;
    // The CM knows everything the descriptor files carried: it asks the kernel for the RTR attributes
    // (peer QPN, its PSN, the address vector with both GIDs, the path MTU) and the RTS ones (our PSN,
    // ACK timeout, retry counts). We apply them with the same ibv_modify_qp() as rdma_write, after
    // setting what the lesson chose itself: the CM's own defaults differ (min_rnr_timer 0 = 655 ms,
    // an ACK timeout from the path's packet lifetime).
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_RTR;
    check_rc(rdma_init_qp_attr(id, &attr, &mask), "rdma_init_qp_attr(RTR)");
    attr.max_dest_rd_atomic = static_cast<std::uint8_t>(responder_resources);
    attr.min_rnr_timer = rc_min_rnr_timer;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    info("CM: peer QPN 0x%06x, PSN 0x%06x, GID %s, GID index %u", attr.dest_qp_num, attr.rq_psn,
         gid_to_string(attr.ah_attr.grh.dgid).c_str(), attr.ah_attr.grh.sgid_index);
    check_rc(ibv_modify_qp(qp, &attr, mask), "ibv_modify_qp(RTR)");

    attr = {};
    mask = 0;
    attr.qp_state = IBV_QPS_RTS;
    check_rc(rdma_init_qp_attr(id, &attr, &mask), "rdma_init_qp_attr(RTS)");
    attr.max_rd_atomic = static_cast<std::uint8_t>(initiator_depth);
    attr.timeout = rc_timeout;
    attr.retry_cnt = rc_retry_cnt;
    attr.rnr_retry = rc_rnr_retry;
    mask |= IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    check_rc(ibv_modify_qp(qp, &attr, mask), "ibv_modify_qp(RTS)");
    //! [cm_ready_qp]
    trace_qp_timers(qp);
}

namespace {

/** A listening cm_id on @p ch: the "any" address of @p family (AF_INET or AF_INET6), port @p port;
 *  for IPv6, AFONLY as given (off: IPv4 clients too, as ::ffff:a.b.c.d). */
CmIdPtr listen_any(rdma_event_channel *ch, int family, int afonly, std::uint16_t port, int backlog, rdma_port_space ps)
{
    rdma_cm_id *raw = nullptr;
    // RDMA_PS_TCP: reliable connected service, the QP type RC (the "TCP" is only the port space's name);
    // RDMA_PS_UDP: unreliable datagrams, the QP type UD (cm_ud.hpp).
    check_rc(rdma_create_id(ch, &raw, nullptr, ps), "rdma_create_id");
    CmIdPtr id(raw);
    SockAddr any;
    if (family == AF_INET) {
        auto *in4 = reinterpret_cast<sockaddr_in *>(&any.storage);
        in4->sin_family = AF_INET;
        in4->sin_addr.s_addr = htonl(INADDR_ANY);
        in4->sin_port = htons(port);
    } else {
        auto *in6 = reinterpret_cast<sockaddr_in6 *>(&any.storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        in6->sin6_port = htons(port);
        check_rc(rdma_set_option(id.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly, sizeof afonly),
                 "rdma_set_option(AFONLY=" + std::to_string(afonly) + ")");
    }
    check_rc(rdma_bind_addr(id.get(), any.get()), "rdma_bind_addr(port " + std::to_string(port) + ")",
             [&](int err) -> std::string {
                 if (err == EADDRINUSE || err == EADDRNOTAVAIL)
                     return "another program (an earlier server?) listens on port " + std::to_string(port) +
                            "; stop it or pick another -lp on both sides";
                 return "check that an RDMA device is up (rdma link show) and that the port is free";
             });
    check_rc(rdma_listen(id.get(), backlog), "rdma_listen");
    return id;
}

} // namespace

CmConnection cm_listen(const Device &dev, std::uint16_t port, int backlog, rdma_port_space ps)
{
    CmConnection c;
    c.channel = create_event_channel();
    if (is_iwarp(dev)) {
        // iWARP: one listener per family, both on this channel. With one IPv6 listener for both, an
        // IPv4 client's request reaches the kernel's iWARP CM with the local address ::ffff:a.b.c.d,
        // which it cannot map to a device (cma.c, iw_conn_req_handler(): rdma_translate_ip()): the
        // request is dropped and the client gets REJECTED. So IPv4 on 0.0.0.0, IPv6 on [::] AFONLY=1.
        c.listen_id = listen_any(c.channel.get(), AF_INET, 1, port, backlog, ps);
        c.listen_id6 = listen_any(c.channel.get(), AF_INET6, 1, port, backlog, ps);
    } else {
        // The IPv6 "any" address with AFONLY off accepts IPv4 clients too (they appear as ::ffff:a.b.c.d).
        c.listen_id = listen_any(c.channel.get(), AF_INET6, 0, port, backlog, ps);
    }
    c.peer = "port " + std::to_string(port);
    return c;
}

bool cm_nobody_listens(const rdma_cm_event &ev)
{
    return ev.event == RDMA_CM_EVENT_REJECTED && (ev.status == rej_invalid_service_id || ev.status == -ECONNREFUSED);
}

std::string cm_addr_hint(int)
{
    return "check the address and -sat; it must be reachable through an RDMA device's interface";
}

std::string cm_route_hint(int err)
{
    return err == ENODEV ? loopback_hint() : std::string("check `ip route get` for the address");
}

int CmTry::resolve_ms() const
{
    return std::max(std::min(deadline.left_ms(), 2000), 1);
}

int CmTry::left_ms() const
{
    return std::max(deadline.left_ms(), 1);
}

CmEventPtr CmTry::event(rdma_cm_event_type expected, const std::string &what)
{
    if (expected == RDMA_CM_EVENT_ADDR_RESOLVED) {
        // As short as the resolution itself (and a second for its event): no answer means try again.
        CmEventPtr ev =
            next_cm_event(conn.channel.get(), Deadline::in_ms(std::min(deadline.left_ms(), resolve_ms() + 1000)));
        if (!ev || (ev->event == RDMA_CM_EVENT_ADDR_ERROR && ev->status == -ETIMEDOUT)) {
            not_yet =
                timeout_error(timeout_s, what,
                              "no answer from " + conn.peer + ": is the server's machine up and reachable (ping it)?");
            return nullptr;
        }
        if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
            throw cm_event_error(*ev, what, conn.peer);
        return ev;
    }
    // The route, and the server's answer: -t running out is "not yet" (cm_retry() then reports the last
    // "nobody listens", not the step the clock happened to stop in), and so is a REJECT saying nobody listens.
    const bool answer = expected == RDMA_CM_EVENT_CONNECT_RESPONSE || expected == RDMA_CM_EVENT_ESTABLISHED;
    CmEventPtr ev = next_cm_event(conn.channel.get(), deadline);
    if (!ev) {
        not_yet = timeout_error(timeout_s, what,
                                answer ? "is the server running on " + conn.peer +
                                             "? raise -t if it is just slow (a server on an iWARP device never answers "
                                             "a RoCE client: the two transports do not talk)"
                                       : "no answer from " + conn.peer + ": raise -t if it is just slow");
        return nullptr;
    }
    if (answer && cm_nobody_listens(*ev)) {
        not_yet = cm_event_error(*ev, what, conn.peer);
        refused = true;
        return nullptr;
    }
    // A client that created its own QP sees CONNECT_RESPONSE (the server's REP) and must finish the
    // handshake itself; one whose QP librdmacm owns would see ESTABLISHED here instead, and so does
    // every client on iWARP (the kernel's iWARP CM takes the QP to RTS: cm_ready_qp()).
    if (ev->event != expected || ev->status != 0)
        throw cm_event_error(*ev, what, conn.peer);
    return ev;
}

bool CmTry::resolve(const Device &dev)
{
    rdma_cm_id *id = conn.id.get();
    check_rc(rdma_resolve_addr(id, nullptr, dst, resolve_ms()), "rdma_resolve_addr(" + conn.peer + ")", cm_addr_hint);
    if (!event(RDMA_CM_EVENT_ADDR_RESOLVED, "the address of " + conn.peer))
        return false;
    check_cm_device(id, dev);
    check_rc(rdma_resolve_route(id, left_ms()), "rdma_resolve_route(" + conn.peer + ")", cm_route_hint);
    return event(RDMA_CM_EVENT_ROUTE_RESOLVED, "a route to " + conn.peer) != nullptr;
}

bool CmTry::refused_at_once(int rc)
{
    if (rc != 0 && errno == ECONNREFUSED) {
        not_yet =
            Error("rdma_connect: nobody listens on " + conn.peer + " (ECONNREFUSED)",
                  "is the server running on " + conn.peer +
                      "? start it first (the side without -sa), with the same -lp (a server on a RoCE or InfiniBand "
                      "device never answers an iWARP client: the two transports do not talk)");
        refused = true;
        return true;
    }
    check_rc(rc, "rdma_connect");
    return false;
}

void CmTry::say_route() const
{
    if (first)
        info("RDMA CM: %s is reachable through %s port %u", conn.peer.c_str(),
             ibv_get_device_name(conn.id->verbs->device), conn.id->port_num);
}

CmConnection cm_retry(const CmServerAddr &server, int timeout_s, ibv_qp *qp,
                      const std::function<bool(CmTry &)> &attempt, rdma_port_space ps, CmBackoff backoff)
{
    SockAddr dst = parse_server_addr(server.addr, server.type, server.port);
    const std::string peer = addr_to_string(dst.get());
    const Deadline deadline(timeout_s);
    std::optional<Error> refused; // the last "nobody listens", which a bare timeout would hide
    int wait_ms = backoff.first_ms;
    for (int n = 1;; ++n) {
        CmTry this_try{.dst = dst.get(), .deadline = deadline, .timeout_s = timeout_s, .first = n == 1};
        this_try.conn.peer = peer;
        this_try.conn.qp = qp;
        this_try.conn.channel = create_event_channel();
        rdma_cm_id *id = nullptr;
        check_rc(rdma_create_id(this_try.conn.channel.get(), &id, nullptr, ps),
                 ps == RDMA_PS_UDP ? "rdma_create_id(RDMA_PS_UDP)" : "rdma_create_id");
        this_try.conn.id.reset(id);
        if (attempt(this_try))
            return std::move(this_try.conn);
        const Error why = this_try.not_yet.value_or(timeout_error(timeout_s, "the server at " + peer));
        if (this_try.refused)
            refused = why;
        if (deadline.expired())
            throw refused.value_or(why);
        if (n == 1)
            info("%s %s yet; trying again for up to %d s", this_try.refused ? "nobody listens on" : "no answer from",
                 peer.c_str(), timeout_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait_ms, deadline.left_ms())));
        wait_ms = std::min(2 * wait_ms, backoff.max_ms);
        if (deadline.expired()) // a wait cut short by -t: no try with nothing left on the clock
            throw refused.value_or(why);
    }
}

CmConnection cm_connect(const CmServerAddr &server, int timeout_s, const Device &dev, ibv_qp *qp, int initiator_depth)
{
    // The calls of rdma_write/requester.cpp's step 4, and one check more: the depth the server grants.
    return cm_retry(server, timeout_s, qp, [&](CmTry &this_try) {
        rdma_cm_id *id = this_try.conn.id.get();
        // 1. and 2. Address and route: which local device and port reach the server, and the path to it.
        if (!this_try.resolve(dev))
            return false;
        this_try.say_route();
        // 3. Connect: the CM sends our QPN and PSN in a REQ; the server answers with a REP carrying its own.
        rdma_conn_param param = cm_conn_param(qp, 0, initiator_depth); // nobody READs from the client
        if (this_try.refused_at_once(rdma_connect(id, &param)))        // (iWARP: nobody listens yet)
            return false;
        // The server's answer, and in it the private data of its rdma_accept(), copied out before the
        // event is acknowledged. iWARP: the answer is ESTABLISHED, the kernel took our QP to RTS; no REP
        // to answer. No depth to check either: the event's initiator_depth is our own IRD there (cma.c
        // cma_iw_handler(), siw_cm.c siw_cm_upcall()).
        const bool iwarp = is_iwarp(dev);
        CmEventPtr rep =
            this_try.event(iwarp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE, "the server to accept");
        if (!rep)
            return false;
        this_try.conn.accept_private_data = private_data_of(*rep);
        if (iwarp)
            return true;
        // The REP says how many READs/atomics the server accepts in flight from us (its responder
        // resources): with fewer than we need, a READ could never be sent. The event gives the values
        // from OUR side: the server's responder resources arrive as our initiator_depth.
        const int granted = rep->param.conn.initiator_depth;
        if (granted < initiator_depth)
            throw Error("the server accepts " + std::to_string(granted) +
                            " READ/atomic request(s) in flight, this sample needs " + std::to_string(initiator_depth),
                        "the server's QP must allow READs and atomics (max_dest_rd_atomic >= 1): is it the matching "
                        "responder of this sample?");
        // 4. We created the QP ourselves, so we take it to RTR and RTS, then tell the CM (an RTU
        //    message): the server sees RDMA_CM_EVENT_ESTABLISHED.
        cm_ready_qp(id, qp, 0, initiator_depth);
        check_rc(rdma_establish(id), "rdma_establish");
        return true;
    });
}

CmConnection cm_accept(std::uint16_t port, int timeout_s, const Device &dev, ibv_qp *qp, int responder_resources)
{
    CmConnection c = cm_listen(dev, port, 1);
    info("listening on port %u; waiting up to %d s for the client (the side with -sa)", port, timeout_s);
    CmEventPtr req =
        expect_cm_event(c.channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, timeout_s, "a client to connect", c.peer);
    c.id.reset(req->id); // a connection request comes with a new cm_id: ours to destroy
    c.peer = addr_to_string(rdma_get_peer_addr(req->id));
    c.qp = qp;
    check_cm_device(req->id, dev);
    // The event gives the values from OUR side: the client's initiator depth arrives as
    // responder_resources, "what you will be asked to accept". rdma_accept(3): our responder_resources
    // must be <= the device's max_qp_rd_atom and preferably >= that value; only our initiator_depth
    // must stay <= the client's responder resources. This server never READs, so its initiator depth
    // is 0; granting no more than the client will use is this sample's policy (it spends no more
    // responder resources than needed), not a rule.
    const int rr = std::min<int>(responder_resources, req->param.conn.responder_resources);
    // Ready to receive (and send) before we accept: the client may post the moment it hears our REP.
    // (On iWARP, the kernel does it during rdma_accept(): see cm_ready_qp().)
    cm_ready_qp(req->id, qp, rr, 0);
    rdma_conn_param param = cm_conn_param(qp, rr, 0);
    check_rc(rdma_accept(req->id, &param), "rdma_accept");
    req.reset();
    //! [established]
    // The client's RTU (its last handshake message) makes the connection ESTABLISHED here. If the RTU
    // is lost, the client, already at RTS, may be sending, and our QP (at RTS too, since cm_ready_qp())
    // accepts what it sends. Two paths are real:
    //  - the CM's REP timer runs out (seconds later), it resends the REP, the client answers with
    //    another RTU, and ESTABLISHED comes late;
    //  - a client that finished first disconnects: its DREQ gives us DISCONNECTED before ESTABLISHED.
    //    What it sent is in our CQ; the sample's own poll finds it.
    // IBV_EVENT_COMM_EST (with rdma_notify(3)) repairs nothing here: IBTA devices raise it only for a
    // packet that reaches a QP still in RTR, and ours is at RTS before rdma_accept(), as librdmacm's
    // own accept does; Soft-RoCE never raises it (nothing in rxe_resp.c or rxe_recv.c does).
    const Deadline deadline(timeout_s);
    for (;;) {
        CmEventPtr ev = next_cm_event(c.channel.get(), deadline);
        if (ev && ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->status == 0)
            break;
        if (ev && ev->event == RDMA_CM_EVENT_DISCONNECTED) {
            info("RDMA CM: %s disconnected before its RTU arrived (lost on the way?); it already did its part",
                 c.peer.c_str());
            c.disconnected = true;
            return c;
        }
        if (ev && ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT && ev->event != RDMA_CM_EVENT_ADDR_CHANGE)
            throw cm_event_error(*ev, "the connection to be established", c.peer);
        if (deadline.expired())
            throw timeout_error(timeout_s, "the connection to be established (RDMA_CM_EVENT_ESTABLISHED)",
                                "no answer from " + c.peer +
                                    ": is the peer running, with -cm and the same -lp, on a device of the same "
                                    "transport (RoCE and iWARP do not talk)? raise -t if it is just slow");
    }
    //! [established]
    info("RDMA CM: connection established from %s", c.peer.c_str());
    return c;
}

void cm_disconnect(CmConnection &c, int timeout_s)
{
    if (!c.id || c.disconnected)
        return;
    // DREQ to the peer; if it already started its own disconnect, this answers it (DREP).
    check_rc(rdma_disconnect(c.id.get()), "rdma_disconnect");
    expect_cm_event(c.channel.get(), RDMA_CM_EVENT_DISCONNECTED, timeout_s, "the disconnect to complete", c.peer);
    c.disconnected = true;
    // The cm_id goes now, not with the program. If the peer's DREQ came first, our rdma_disconnect() was
    // the DREP, and if that is lost the peer's CM resends its DREQ seconds later. The kernel's CM answers
    // a resent DREQ during TIMEWAIT (under a second here) or, with a DREP of its own, for a cm_id that is
    // gone; a cm_id kept past TIMEWAIT ignores it, and the peer would wait out its -t (CmClients does
    // the same for each client of a server).
    c.id.reset();
    // rdma_disconnect() moves only a QP of librdmacm's own (rdma_create_qp()) to ERR; ours we move.
    if (c.qp != nullptr)
        qp_to_error(c.qp);
}

} // namespace rdma_samples
