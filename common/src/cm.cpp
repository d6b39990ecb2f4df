/** @file cm.cpp @brief RDMA CM: addresses, bounded event waits with explained failures, connect/accept. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <cstring>
#include <functional>
#include <optional>
#include <thread>

namespace rdma_samples {

namespace {

using Clock = std::chrono::steady_clock;

/** A librdmacm call that failed, with a hint that fits the CM and the errno (the verbs table knows none). */
void check_cm(int rc, const std::string &call, const std::function<std::string(int)> &hint)
{
    if (rc == 0) {
        trace("%s = 0", call.c_str());
        return;
    }
    const int err = errno != 0 ? errno : EINVAL;
    trace("%s failed: %s (errno %d)", call.c_str(), std::strerror(err), err);
    throw Error(call + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")", hint(err));
}

std::string loopback_hint()
{
    return "RDMA CM cannot use 127.0.0.1 or ::1 on RoCE (the kernel resolves loopback addresses only on InfiniBand); "
           "use the IP address of the network interface the RDMA device is bound to (rdma link show; ip addr)";
}

} // namespace

SockAddr parse_server_addr(const std::string &text, AddrType type, std::uint16_t port)
{
    SockAddr a;
    auto *in4 = reinterpret_cast<sockaddr_in *>(&a.storage);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&a.storage);
    const bool nul = text.find('\0') != std::string::npos; // the C parsers below would stop at it
    if (type == AddrType::ipv4) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        if (nul || inet_pton(AF_INET, text.c_str(), &in4->sin_addr) != 1)
            throw Error("-sa " + quote(text) + " is not an IPv4 address", "give a dotted quad such as 10.77.0.1, or say "
                                                                       "what it is with -sat ipv6 or -sat gid");
        return a;
    }
    if (type == AddrType::ipv6) {
        addrinfo hints{};
        hints.ai_family = AF_INET6;
        hints.ai_flags = AI_NUMERICHOST; // an address, never a name lookup
        addrinfo *res = nullptr;
        if (nul || getaddrinfo(text.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
            throw Error("-sa " + quote(text) + " is not an IPv6 address",
                        "give an address such as fd00::1 (link-local ones need the interface: fe80::1%eth0)");
        std::memcpy(in6, res->ai_addr, sizeof *in6);
        freeaddrinfo(res);
        in6->sin6_port = htons(port);
        return a;
    }
    // A GID. On RoCE (v1 and v2) every GID is built from an IP address of the interface: the
    // IPv4-mapped ::ffff:a.b.c.d stands for a.b.c.d, any other for the IPv6 address it spells.
    ibv_gid gid{};
    if (!gid_from_string(text, gid))
        throw Error("-sa " + quote(text) + " is not a GID", "give a GID as ibv_devinfo -v prints it, e.g. ::ffff:10.77.0.1");
    static const std::uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(gid.raw, v4_prefix, sizeof v4_prefix) == 0) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        std::memcpy(&in4->sin_addr, gid.raw + 12, 4);
        return a;
    }
    if (gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80)
        throw Error("-sa " + quote(text) + " is a link-local GID (fe80::/10): it names an address on one link only",
                    "RDMA CM needs to know which link: use -sat ipv6 -sa " + text + "%IFACE, or the peer's "
                    "IPv4-mapped GID (::ffff:a.b.c.d) with -sat gid. AF_IB (InfiniBand GID addressing) is not "
                    "supported by RoCE devices");
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, gid.raw, 16);
    return a;
}

std::string addr_to_string(const sockaddr *sa)
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const auto *in4 = reinterpret_cast<const sockaddr_in *>(sa);
        inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
        return std::string(text) + " port " + std::to_string(ntohs(in4->sin_port));
    }
    if (sa->sa_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
        // An IPv4 client reaching a dual-stack listener shows up as ::ffff:a.b.c.d; print a.b.c.d.
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, text, sizeof text);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        return std::string(text) + " port " + std::to_string(ntohs(in6->sin6_port));
    }
    return "(address family " + std::to_string(sa->sa_family) + ")";
}

std::string cm_event_name(rdma_cm_event_type type)
{
    std::string s = rdma_event_str(type);
    return s.rfind("RDMA_CM_EVENT_", 0) == 0 ? s : "RDMA_CM_EVENT_" + s;
}

EventChannelPtr create_event_channel()
{
    EventChannelPtr ch(check(rdma_create_event_channel(), "rdma_create_event_channel"));
    // Non-blocking, so that every wait below can poll() the fd with a timeout (-t) instead of blocking
    // in rdma_get_cm_event() forever when the peer never answers.
    const int flags = fcntl(ch->fd, F_GETFL);
    check_rc(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == -1 ? -1 : 0, "fcntl(O_NONBLOCK) on the CM event channel");
    return ch;
}

CmEventPtr next_cm_event(rdma_event_channel *ch, Clock::time_point deadline)
{
    for (;;) {
        rdma_cm_event *ev = nullptr;
        if (rdma_get_cm_event(ch, &ev) == 0) {
            trace("rdma_get_cm_event = %s, status %d", cm_event_name(ev->event).c_str(), ev->status);
            return CmEventPtr(ev);
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail_errno("rdma_get_cm_event", errno);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            return nullptr;
        pollfd pfd{ch->fd, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left)) < 0 && errno != EINTR)
            fail_errno("poll(CM event channel)", errno);
    }
}

Error cm_event_error(const rdma_cm_event &ev, const std::string &what, const std::string &peer)
{
    const std::string head = "waiting for " + what + ": got " + cm_event_name(ev.event) + " (status " +
                             std::to_string(ev.status) + ")";
    switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
        return Error(head, "no local RDMA device reaches " + peer + ": check the address, that it is on a network "
                           "an RDMA device is bound to (rdma link show), and -sat");
    case RDMA_CM_EVENT_ROUTE_ERROR:
        return Error(head, "no route to " + peer + " through the RDMA device; check `ip route get` for the address");
    case RDMA_CM_EVENT_UNREACHABLE:
        return Error(head, "the CM got no answer from " + peer + ": is the server running there, is the network up, "
                           "and is the server's RDMA device bound to that address?");
    case RDMA_CM_EVENT_REJECTED:
        if (ev.status == 8) // IB_CM_REJ_INVALID_SERVICE_ID: no listener on that port
            return Error(head + ": nobody listens on " + peer, "is the server running on " + peer + "? start it "
                                                               "first (the side without -sa), with the same -lp");
        return Error(head + ": the server refused the connection",
                     "the server may have all the clients it expects (-nc) or may have stopped; check its output");
    case RDMA_CM_EVENT_CONNECT_ERROR:
        return Error(head, "the connection failed while being set up; check the peer's output");
    case RDMA_CM_EVENT_DISCONNECTED:
        return Error(head + ": the peer disconnected", "the peer stopped early; its output says why");
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        return Error(head + ": the RDMA device went away", "check `rdma link show`");
    default:
        return Error(head, "an event this sample does not expect here; check the peer's output");
    }
}

CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, int timeout_s, const std::string &what,
                           const std::string &peer)
{
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
        CmEventPtr ev = next_cm_event(ch, deadline);
        if (!ev)
            throw Error("timed out after " + std::to_string(timeout_s) + " s waiting for " + what + " (" +
                            cm_event_name(expected) + ")",
                        "no answer from " + peer + ": is the peer running, with -cm and the same -lp? raise -t if "
                        "it is just slow");
        if (ev->event == expected && ev->status == 0)
            return ev;
        // Housekeeping events that say nothing about this connection.
        if (ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT || ev->event == RDMA_CM_EVENT_ADDR_CHANGE)
            continue;
        throw cm_event_error(*ev, what, peer);
    }
}

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
    p.qp_num = qp->qp_num;                     // our own QP (not rdma_create_qp's): tell the CM its number
    p.responder_resources = static_cast<std::uint8_t>(responder_resources); // READs/atomics the peer may have at us
    p.initiator_depth = static_cast<std::uint8_t>(initiator_depth);         // ... and we at the peer
    p.retry_count = rc_retry_cnt;              // 6: on Soft-RoCE 7 would retry forever (see rc_qp.hpp)
    p.rnr_retry_count = rc_rnr_retry;          // 6, not 7: 7 means "forever" for RNR (IBTA)
    p.flow_control = 1;
    return p;
}

void cm_ready_qp(rdma_cm_id *id, ibv_qp *qp, int responder_resources, int initiator_depth)
{
    //! [cm_ready_qp]
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

CmConnection cm_listen(const Args &args, int backlog)
{
    CmConnection c;
    c.channel = create_event_channel();
    rdma_cm_id *id = nullptr;
    // RDMA_PS_TCP: reliable connected service, the QP type RC (the "TCP" is only the port space's name).
    check_rc(rdma_create_id(c.channel.get(), &id, nullptr, RDMA_PS_TCP), "rdma_create_id");
    c.listen_id.reset(id);
    // The IPv6 "any" address with AFONLY off accepts IPv4 clients too (they appear as ::ffff:a.b.c.d).
    SockAddr any;
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&any.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(args.listen_port);
    int afonly = 0;
    check_rc(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly, sizeof afonly),
             "rdma_set_option(AFONLY=0)");
    check_cm(rdma_bind_addr(id, any.get()), "rdma_bind_addr(port " + std::to_string(args.listen_port) + ")",
             [&](int err) -> std::string {
                 if (err == EADDRINUSE || err == EADDRNOTAVAIL)
                     return "another program (an earlier server?) listens on port " + std::to_string(args.listen_port) +
                            "; stop it or pick another -lp on both sides";
                 return "check that an RDMA device is up (rdma link show) and that the port is free";
             });
    check_rc(rdma_listen(id, backlog), "rdma_listen");
    c.peer = "port " + std::to_string(args.listen_port);
    return c;
}

CmConnection cm_connect(const Args &args, const Device &dev, ibv_qp *qp, int initiator_depth)
{
    if (!args.server_addr)
        throw Error("-cm: this side is the RDMA CM client but no server address was given",
                    "give the server's address with -sa ADDR (the server is the side started without -sa)");
    SockAddr dst = parse_server_addr(*args.server_addr, args.server_addr_type, args.listen_port);
    const std::string peer = addr_to_string(dst.get());
    const int timeout_ms = args.timeout_s * 1000;
    const auto deadline = Clock::now() + std::chrono::seconds(args.timeout_s);
    // The last "nobody listens" answer. When -t runs out between two tries, that answer (not a bare
    // timeout) is what the user needs to read, whichever step the clock ran out in.
    std::optional<Error> refused;
    for (bool told = false;; told = true) {
        CmConnection c;
        c.peer = peer;
        c.qp = qp;
        c.channel = create_event_channel();
        rdma_cm_id *id = nullptr;
        check_rc(rdma_create_id(c.channel.get(), &id, nullptr, RDMA_PS_TCP), "rdma_create_id");
        c.id.reset(id);

        // 1. Address: which local device and port reach the server (like ARP plus a routing lookup).
        //    Each try is short: a server machine that is still coming up answers ARP a moment later.
        const int attempt_ms = std::min(timeout_ms, 2000);
        check_cm(rdma_resolve_addr(id, nullptr, dst.get(), attempt_ms), "rdma_resolve_addr(" + peer + ")",
                 [](int) -> std::string {
                     return "check the address and -sat; it must be reachable through an RDMA device's interface";
                 });
        {
            CmEventPtr ev = next_cm_event(c.channel.get(), std::min(deadline, Clock::now() + std::chrono::milliseconds(attempt_ms + 1000)));
            const bool no_answer = !ev || (ev->event == RDMA_CM_EVENT_ADDR_ERROR && ev->status == -ETIMEDOUT);
            if (no_answer && Clock::now() < deadline) {
                if (!told)
                    info("no answer from %s yet; trying again for up to %d s", peer.c_str(), args.timeout_s);
                continue;
            }
            if (!ev && refused)
                throw *refused;
            if (!ev)
                throw Error("timed out after " + std::to_string(args.timeout_s) + " s waiting for the address of " + peer,
                            "no answer from " + peer + ": is the server's machine up and reachable (ping it)?");
            if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
                throw cm_event_error(*ev, "the address of " + peer, peer);
        }
        check_cm_device(id, dev);
        // 2. Route: the path to it (on RoCE: the next hop's MAC, the GID to send from).
        check_cm(rdma_resolve_route(id, timeout_ms), "rdma_resolve_route(" + peer + ")",
                 [](int err) { return err == ENODEV ? loopback_hint() : std::string("check `ip route get` for the address"); });
        expect_cm_event(c.channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, args.timeout_s, "a route to " + peer, peer);
        if (!told)
            info("RDMA CM: %s is reachable through %s port %u", peer.c_str(), ibv_get_device_name(id->verbs->device),
                 id->port_num);

        // 3. Connect: the CM sends our QPN and PSN in a REQ; the server answers with a REP carrying its own.
        rdma_conn_param param = cm_conn_param(qp, 0, initiator_depth); // nobody READs from the client
        check_rc(rdma_connect(id, &param), "rdma_connect");
        CmEventPtr ev = next_cm_event(c.channel.get(), deadline);
        if (ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8 && Clock::now() < deadline) {
            // Nobody listens on that port (yet): a server started at the same time may still be setting
            // up. Like a TCP client that retries a refused connect(), try again until -t runs out.
            if (!told)
                info("nobody listens on %s yet; trying again for up to %d s", peer.c_str(), args.timeout_s);
            refused = cm_event_error(*ev, "the server to accept", peer);
            ev.reset();
            std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(200),
                                                                  deadline - Clock::now()));
            continue;
        }
        if (!ev && refused)
            throw *refused;
        if (!ev)
            throw Error("timed out after " + std::to_string(args.timeout_s) + " s waiting for the server to accept",
                        "is the server running on " + peer + "? raise -t if it is just slow");
        // A client that created its own QP sees CONNECT_RESPONSE (the server's REP) and must finish the
        // handshake itself; one whose QP librdmacm owns would see ESTABLISHED here instead.
        if (ev->event != RDMA_CM_EVENT_CONNECT_RESPONSE || ev->status != 0)
            throw cm_event_error(*ev, "the server to accept", peer);
        // The REP says how many READs/atomics the server accepts in flight from us (its responder
        // resources): with fewer than we need, a READ could never be sent. The event gives the values
        // from OUR side: the server's responder resources arrive as our initiator_depth.
        const int granted = ev->param.conn.initiator_depth;
        if (granted < initiator_depth)
            throw Error("the server accepts " + std::to_string(granted) + " READ/atomic request(s) in flight, this "
                            "sample needs " + std::to_string(initiator_depth),
                        "the server's QP must allow READs and atomics (max_dest_rd_atomic >= 1): is it the matching "
                        "responder of this sample?");
        // 4. We created the QP ourselves, so we take it to RTR and RTS, then tell the CM (an RTU message):
        //    the server sees RDMA_CM_EVENT_ESTABLISHED.
        cm_ready_qp(id, qp, 0, initiator_depth);
        check_rc(rdma_establish(id), "rdma_establish");
        return c;
    }
}

CmConnection cm_accept(const Args &args, const Device &dev, ibv_qp *qp, int responder_resources)
{
    if (args.server_addr)
        throw Error("-cm: this side is the RDMA CM server, it takes no -sa",
                    "start this side without -sa; give -sa " + *args.server_addr + " to its peer instead");
    CmConnection c = cm_listen(args, 1);
    info("listening on port %u; waiting up to %d s for the client (the side with -sa)", args.listen_port,
         args.timeout_s);
    CmEventPtr req = expect_cm_event(c.channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, args.timeout_s,
                                     "a client to connect", c.peer);
    c.id.reset(req->id); // a connection request comes with a new cm_id: ours to destroy
    c.peer = addr_to_string(rdma_get_peer_addr(req->id));
    c.qp = qp;
    check_cm_device(req->id, dev);
    // Stay within the client's offer (IBTA CM: a REP's responder resources <= the REQ's initiator
    // depth, its initiator depth <= the REQ's responder resources). The event gives the values from
    // OUR side: the client's initiator depth arrives as responder_resources, "what you must accept".
    // This server never READs, so its initiator depth is 0; it grants at most what the client asked.
    const int rr = std::min<int>(responder_resources, req->param.conn.responder_resources);
    // Ready to receive (and send) before we accept: the client may post the moment it hears our REP.
    cm_ready_qp(req->id, qp, rr, 0);
    rdma_conn_param param = cm_conn_param(qp, rr, 0);
    check_rc(rdma_accept(req->id, &param), "rdma_accept");
    req.reset();
    expect_cm_event(c.channel.get(), RDMA_CM_EVENT_ESTABLISHED, args.timeout_s, "the connection to be established",
                    c.peer);
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
    // rdma_disconnect() moves only a QP of librdmacm's own (rdma_create_qp()) to ERR; ours we move.
    if (c.qp != nullptr)
        qp_to_error(c.qp);
}

DescriptorReceive::DescriptorReceive(ibv_pd *pd, ibv_qp *qp) : buf_(max_descriptor_text)
{
    // Local write: the device writes the incoming message into this buffer. Nothing remote.
    mr_.reset(check(ibv_reg_mr(pd, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr(descriptor receive)"));
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf_.data());
    sge.length = static_cast<std::uint32_t>(buf_.size());
    sge.lkey = mr_->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = descriptor_wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    check_rc(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv(descriptor, " + std::to_string(buf_.size()) + " bytes)");
}

std::string DescriptorReceive::wait(Completions &done, int timeout_s)
{
    const ibv_wc wc = done.wait(descriptor_wr_id, IBV_WC_RECV, timeout_s, "the peer's descriptor (a SEND right after connecting)");
    return std::string(buf_.data(), wc.byte_len);
}

void send_descriptor(ibv_pd *pd, ibv_qp *qp, Completions &done, const std::string &text, int timeout_s)
{
    if (text.size() > max_descriptor_text)
        throw Error("the descriptor is " + std::to_string(text.size()) + " bytes, more than the peer's receive holds",
                    "a bug: descriptors are a few hundred bytes");
    Buffer buf(text.size());
    std::memcpy(buf.data(), text.data(), text.size());
    // The source of a SEND is only read locally: no access flags at all.
    MrPtr mr(check(ibv_reg_mr(pd, buf.data(), buf.size(), 0), "ibv_reg_mr(descriptor send)"));
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    sge.length = static_cast<std::uint32_t>(text.size());
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = descriptor_wr_id;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    check_rc(ibv_post_send(qp, &wr, &bad), "ibv_post_send(SEND, descriptor)");
    done.wait(descriptor_wr_id, IBV_WC_SEND, timeout_s, "the descriptor SEND");
}

int find_client(const std::vector<CmClient> &clients, const rdma_cm_id *id)
{
    for (std::size_t i = 0; i < clients.size(); ++i)
        if (clients[i].id.get() == id)
            return static_cast<int>(i);
    return -1;
}

void reject_request(CmEventPtr request)
{
    rdma_cm_id *id = request->id;
    check_rc(rdma_reject(id, nullptr, 0), "rdma_reject");
    request.reset(); // acknowledge the event before destroying its id
    rdma_destroy_id(id);
}

void disconnect_clients(rdma_event_channel *ch, std::vector<CmClient> &clients, int timeout_s)
{
    int waiting = 0;
    for (auto &c : clients)
        if (c.established && !c.disconnected) {
            if (rdma_disconnect(c.id.get()) == 0)
                ++waiting;
            else
                c.disconnected = true; // already gone
        }
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    while (waiting > 0) {
        CmEventPtr ev = next_cm_event(ch, deadline);
        if (!ev)
            break; // the work is done; a peer that does not confirm its disconnect changes nothing
        const int i = find_client(clients, ev->id);
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED && i >= 0 && !clients[i].disconnected) {
            clients[i].disconnected = true;
            --waiting;
        } else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            reject_request(std::move(ev));
        }
    }
    // rdma_disconnect() leaves QPs of our own alone: stop each one (any receive still posted is flushed).
    for (auto &c : clients)
        if (c.qp != nullptr)
            qp_to_error(c.qp);
}

} // namespace rdma_samples
