/**
 * @file cm.hpp
 * @brief RDMA CM (librdmacm): connect two queue pairs through an IP address and a port, no files.
 *
 * With descriptor files the two sides swap QPN, PSN and GID by hand and move their QPs INIT -> RTR ->
 * RTS themselves (rdma_write/requester.cpp writes that out). The RDMA Connection Manager does the same
 * exchange over the network, like TCP's connect()/accept():
 *
 *  - the server (no `-sa`) binds a port (`-lp`) and listens; the client (`-sa ADDR`) resolves ADDR to a
 *    local RDMA device and a route, then connects;
 *  - the CM carries each side's QPN and starting PSN in its REQ/REP messages and hands each side the
 *    attributes for RTR and RTS (rdma_init_qp_attr()), so nobody copies a file.
 *
 * librdmacm can also create the QP itself (rdma_create_qp()) and then drive INIT/RTR/RTS inside
 * rdma_connect()/rdma_accept(). These samples keep their own QP, created with ibv_create_qp() on the
 * device they opened, so that the lesson's PD, MR, CQ and QP are the same with or without `-cm`; the CM
 * only fills in what the descriptor files carried, and cm_ready_qp() shows the two ibv_modify_qp() calls.
 *
 * Every wait on the CM is bounded by `-t`: the event channel's file descriptor is polled with a timeout,
 * never a blocking rdma_get_cm_event(). Each failure event (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE,
 * REJECTED, CONNECT_ERROR) becomes an Error with a hint.
 *
 * For the pairs, `-cm` is a few calls: the client posts a DescriptorReceive, calls cm_connect() and
 * waits for the descriptor (rdma_write/requester.cpp writes cm_connect()'s four calls out, in a
 * cm_retry()); the server calls cm_accept() and send_descriptor(); both end with
 * cm_disconnect() (exchange.hpp wraps the first three for the lessons after rdma_write). A server for
 * many clients is cm_server.hpp; `-sa` is read by cm_address.hpp. rdma_file_transfer, whose QP
 * librdmacm creates (rdma_create_qp()), makes the calls itself, its client in a cm_retry() too, and
 * waits with expect_cm_event(); the rest of the event handling is private (common/src/cm_internal.hpp).
 */
#pragma once

#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/wait.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rdma_samples {

/// @cond DELETERS
struct EventChannelDeleter {
    void operator()(rdma_event_channel *c) const { rdma_destroy_event_channel(c); }
};
struct CmIdDeleter {
    void operator()(rdma_cm_id *id) const { rdma_destroy_id(id); }
};
struct CmEventDeleter {
    void operator()(rdma_cm_event *e) const { rdma_ack_cm_event(e); }
};
/// @endcond

using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>; ///< rdma_create_event_channel()
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;                         ///< rdma_create_id()
/** @brief An event taken with rdma_get_cm_event(); acknowledged (rdma_ack_cm_event()) when it goes. */
using CmEventPtr = std::unique_ptr<rdma_cm_event, CmEventDeleter>;

/** @brief One RDMA CM connection: its event channel, the listening id (server) and the connected id. */
struct CmConnection {
    EventChannelPtr channel;   ///< where this connection's events arrive
    CmIdPtr listen_id;         ///< the server's listening id (empty on a client)
    CmIdPtr listen_id6;        ///< iWARP only: the IPv6 listener beside the IPv4 one (cm_listen())
    CmIdPtr id;                ///< the connected id
    std::string peer;          ///< the other side, as text
    ibv_qp *qp = nullptr;      ///< our QP (not the CM's): cm_disconnect() moves it to ERR
    bool disconnected = false; ///< RDMA_CM_EVENT_DISCONNECTED was seen
    /** @brief cm_connect() only: the private data of the server's accept (rdma_accept()'s conn_param), as
     *  many bytes as the event gives (RoCE and InfiniBand: the REP's 196, padded with zeros; iWARP: the
     *  MPA reply's); the peer's bytes, unchecked. */
    std::vector<std::uint8_t> accept_private_data;
};

/**
 * @brief Client side of `-cm`: resolve the server's address (and its route) to a local device, check
 * it is ours, connect @p qp and wait (bounded) until the server has accepted. @p qp must be in INIT,
 * with any receive it needs already posted: the server may send the moment it has accepted.
 *
 * One attempt is address, route, REQ, REP; while the server's machine does not answer, or answers
 * that nobody listens on the port (REJECT reason 8, "Invalid Service ID"), it tries again until
 * @p timeout_s runs out, as a TCP client retries a refused connect().
 *
 * The server may say something in its accept (rdma_accept()'s private data): the CM hands it over on
 * RDMA_CM_EVENT_CONNECT_RESPONSE (on iWARP, where the kernel connects and no REP is answered, on
 * RDMA_CM_EVENT_ESTABLISHED), and cm_connect() copies it into the connection's accept_private_data
 * before the event is acknowledged. It is the peer's input: check it before use.
 * @param server    where to connect (`-sa`, `-sat`, `-lp`: Args::cm_server())
 * @param timeout_s the bound of the whole connect (`-t`)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT
 * @param initiator_depth READs/atomics this side will have in flight at the server (0 when none);
 *                  the server must grant at least this many, or the connection is an error
 * @return the connected connection, with the server's accept_private_data
 */
CmConnection cm_connect(const CmServerAddr &server, int timeout_s, const Device &dev, ibv_qp *qp,
                        int initiator_depth = 0);

/**
 * @brief One try of an RDMA CM client's connect: its own event channel and cm_id (a cm_id that failed
 * to connect cannot be used again), made by cm_retry() and handed to the code that makes the calls.
 */
struct CmTry {
    CmConnection conn{};               ///< this try's channel and cm_id: the connection, if it succeeds
    sockaddr *dst = nullptr;           ///< the server's address (`-sa`, `-sat`, `-lp`)
    const Deadline &deadline;          ///< the whole connect's bound (`-t`)
    int timeout_s = 0;                 ///< `-t`, for messages
    bool first = false;                ///< the first try (say_route() prints only then)
    std::optional<Error> not_yet = {}; ///< set by event(): why the server is not there yet
    bool refused = false;              ///< ... because its machine answered that nobody listens on the port

    /** @brief The bound of this try's address resolution: short, so that a server machine that does not
     *  answer ARP yet is asked again. @return milliseconds */
    int resolve_ms() const;
    /** @brief What is left of the deadline, for rdma_resolve_route() (at least 1). @return milliseconds */
    int left_ms() const;
    /**
     * @brief Wait (bounded) for the event that answers the last call: RDMA_CM_EVENT_ADDR_RESOLVED,
     * ROUTE_RESOLVED or CONNECT_RESPONSE. A server that is not there yet (no answer to the address, no
     * answer to the REQ, or a REJECT saying nobody listens) is not an error, nor is `-t` running out
     * in the middle of a try: the event is empty and not_yet says why, for cm_retry() to try again or
     * to report. Anything else throws, explained.
     * @param expected the event
     * @param what     what it answers, for messages
     * @return the event, or empty: try again
     */
    CmEventPtr event(rdma_cm_event_type expected, const std::string &what);
    /**
     * @brief Steps 1 and 2 of every client, as rdma_write's requester writes them out: rdma_resolve_addr()
     * and its event, the check that the device reaching the server is @p dev, rdma_resolve_route() and its
     * event.
     * @param dev the device this side opened
     * @return false when the address got no answer yet (not_yet says why): return it, to try again
     */
    bool resolve(const Device &dev);
    /**
     * @brief Check rdma_connect()'s result @p rc. On iWARP the connect is a TCP connect made inside the
     * call (siw_connect() in the kernel), so while nobody listens it fails at once with ECONNREFUSED (the
     * server's kernel answered with a RST), where RoCE's REQ gets a REJECT event later: not_yet says so.
     * Any other failure throws, as check_rc() does.
     * @param rc what rdma_connect() returned
     * @return true when refused because nobody listens yet: return false from the try, to try again
     */
    bool refused_at_once(int rc);
    /** @brief On the first try, print which device and port reach the server (once the route is resolved). */
    void say_route() const;
};

/**
 * @brief How long cm_retry() waits between two tries: @p first_ms after the first, doubled after each
 * further one up to @p max_ms, never past `-t`. The default is a steady 200 ms.
 */
struct CmBackoff {
    int first_ms = 200; ///< the wait after the first try
    int max_ms = 200;   ///< the longest wait, reached by doubling
};

/**
 * @brief The client's connect, tried again like a TCP client whose connect() is refused: a server
 * started at the same time may still be setting up. Each try gets a new CmTry; when `-t` runs out, the
 * last "nobody listens" is reported if there was one (a bare timeout would hide it), else the timeout.
 * @param server    where to connect (Args::cm_server())
 * @param timeout_s the bound of the whole connect (`-t`)
 * @param qp        our QP (cm_disconnect() moves it to ERR)
 * @param attempt   one try: true once connected (our QP at RTS, the RTU sent), false to try again
 *                  (after CmTry::event() came back empty)
 * @param ps        the port space of each try's cm_id: RDMA_PS_TCP for RC, RDMA_PS_UDP for a UD lookup
 * @param backoff   the wait between tries (the only one: an attempt does not sleep on its own)
 * @return the connection
 */
CmConnection cm_retry(const CmServerAddr &server, int timeout_s, ibv_qp *qp,
                      const std::function<bool(CmTry &)> &attempt, rdma_port_space ps = RDMA_PS_TCP,
                      CmBackoff backoff = {});

/**
 * @brief Whether @p ev says that nobody listens on the server's port, so that a client may try again:
 * REJECTED with status 8 on InfiniBand and RoCE (IBTA CM reason "Invalid Service ID"), or with status
 * -ECONNREFUSED on iWARP, whose connect is a TCP connect: the server's kernel answered the SYN with a
 * RST (the kernel's cma.c, cma_iw_handler(): IW_CM_EVENT_CONNECT_REPLY with -ECONNREFUSED).
 * @param ev the event
 * @return true when nobody listens
 */
bool cm_nobody_listens(const rdma_cm_event &ev);

/**
 * @brief The reason a REJECTED event carries in its private data (the text rdma_reject() was given, up
 * to its first NUL), or "" when there is none or the event is another.
 * @param ev the event
 * @return the reason, unquoted: the peer's text
 */
std::string cm_reject_reason(const rdma_cm_event &ev);

/** @brief The hint for a failed rdma_resolve_addr(). @param err its errno @return the hint */
std::string cm_addr_hint(int err);
/** @brief The hint for a failed rdma_resolve_route() (ENODEV: a loopback address on RoCE).
 *  @param err its errno @return the hint */
std::string cm_route_hint(int err);

/**
 * @brief Server side of `-cm` for one client: listen on @p port, take the first connection request
 * (bounded by @p timeout_s), move @p qp to RTR and RTS, accept, wait until established.
 * @param port      the port to listen on (`-lp`)
 * @param timeout_s the bound of each wait (`-t`)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT, with its receives posted
 * @param responder_resources READs/atomics the client may have in flight at us (0 when none); the
 *                  server grants no more than the client's REQ asked for (its initiator depth), a
 *                  policy: rdma_accept(3) asks only <= max_qp_rd_atom, preferably >= the client's offer
 * @return the accepted connection
 */
CmConnection cm_accept(std::uint16_t port, int timeout_s, const Device &dev, ibv_qp *qp, int responder_resources = 0);

/**
 * @brief Orderly goodbye: rdma_disconnect() (the CM sends DREQ; the peer answers DREP), wait, bounded,
 * for RDMA_CM_EVENT_DISCONNECTED, destroy the cm_id (so that the kernel answers a DREQ the peer resends
 * because our DREP was lost), then move our QP to ERR. Either side may start it; both may.
 *
 * rdma_disconnect() moves only a QP that librdmacm created (rdma_create_qp()) to ERR; ours it leaves
 * alone, so we do it. In ERR the QP accepts no more packets and flushes whatever work requests are
 * still posted (IBV_WC_WR_FLUSH_ERR). The samples have none left by then: every request they posted
 * has completed and been polled, so nothing remains to drain before ibv_destroy_qp().
 * @param c         the connection
 * @param timeout_s the bound
 */
void cm_disconnect(CmConnection &c, int timeout_s);

/**
 * @brief The event name, e.g. "RDMA_CM_EVENT_REJECTED" (rdma_event_str()).
 * @param type the event type
 * @return its name
 */
std::string cm_event_name(rdma_cm_event_type type);

/**
 * @brief Wait, at most @p wait_ms, until @p ch holds an event: poll() on its file descriptor (every
 * channel of this library is non-blocking). Then rdma_get_cm_event() returns at once.
 * @param ch      the event channel
 * @param wait_ms how long to wait
 * @return true when an event is there
 */
bool cm_event_ready(rdma_event_channel *ch, int wait_ms);

/**
 * @brief The device and port the CM chose for @p id must be the ones this side opened (-d).
 * @param id  the resolved cm_id
 * @param dev the device this side opened
 * @throws Error naming both devices, with the -d to pass
 */
void check_cm_device(const rdma_cm_id *id, const Device &dev);

/**
 * @brief Move our own QP to RTR and RTS with the attributes the CM negotiated (rdma_init_qp_attr()),
 * then set the timers and READ/atomic depths ourselves, so that both flows run with the same values.
 *
 * rdma_init_qp_attr() would give min_rnr_timer 0 (655 ms, the IB CM's default) and an ACK timeout
 * derived from the path's packet lifetime; the samples teach min_rnr_timer 12 and timeout 14
 * (rc_qp.hpp), so they are set explicitly here, as the descriptor-file flow sets them.
 * @param id                  the connected (or connecting) cm_id
 * @param qp                  our QP, in INIT
 * @param responder_resources READs/atomics the peer may have in flight at us (max_dest_rd_atomic)
 * @param initiator_depth     READs/atomics we may have in flight at the peer (max_rd_atomic)
 */
void cm_ready_qp(rdma_cm_id *id, ibv_qp *qp, int responder_resources = 0, int initiator_depth = 0);

/**
 * @brief Connection parameters for our own QP: its number, retry counts that end (6), and the
 * READ/atomic depths in both directions.
 * @param qp                  our queue pair
 * @param responder_resources READs/atomics the peer may have in flight at us
 * @param initiator_depth     READs/atomics we may have in flight at the peer
 * @return the parameters for rdma_connect() / rdma_accept()
 */
rdma_conn_param cm_conn_param(const ibv_qp *qp, int responder_resources = 0, int initiator_depth = 0);

/**
 * @brief rdma_create_event_channel(), its fd made non-blocking so waits can be bounded.
 * @return the channel
 */
EventChannelPtr create_event_channel();

/**
 * @brief Wait (bounded by @p timeout_s) for event @p expected on @p ch; any failure event becomes an
 * Error whose message names it and @p what, with a hint that names @p peer (ADDR port P).
 * @param ch        the event channel
 * @param expected  e.g. RDMA_CM_EVENT_ADDR_RESOLVED
 * @param timeout_s the bound (-t)
 * @param what      what is waited for, e.g. "the server to accept"
 * @param peer      addr_to_string() of the other side, for hints
 * @return the event
 */
CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, int timeout_s, const std::string &what,
                           const std::string &peer);

/**
 * @brief expect_cm_event() bounded by what is left of @p deadline: for a wait inside a loop of tries
 * (a client that tries again while nobody listens), so that the last try cannot run past -t. The
 * timeout's message names the deadline's whole -t.
 * @param ch       the event channel
 * @param expected e.g. RDMA_CM_EVENT_ADDR_RESOLVED
 * @param deadline the bound of all the tries
 * @param what     what is waited for
 * @param peer     addr_to_string() of the other side, for hints
 * @return the event
 */
CmEventPtr expect_cm_event(rdma_event_channel *ch, rdma_cm_event_type expected, const Deadline &deadline,
                           const std::string &what, const std::string &peer);

/**
 * @brief Server side of `-cm`: bind @p port on every address, listen. On RoCE and InfiniBand one IPv6
 * listener takes both families (IPv4 clients appear as ::ffff:a.b.c.d); on iWARP one listener is IPv4
 * (0.0.0.0) beside an IPv6 one with AFONLY on ([::], listen_id6): the kernel's iWARP CM cannot find the
 * device of an IPv4-mapped local address, and drops such a request (the client sees REJECTED).
 * @param dev       the device this side opened (its transport decides the listener's family)
 * @param port      the port (`-lp`)
 * @param backlog   connection requests the kernel may queue
 * @param ps        RDMA_PS_TCP (RC connections) or RDMA_PS_UDP (UD, cm_ud.hpp)
 * @return a connection with channel and listen_id set, id empty
 */
CmConnection cm_listen(const Device &dev, std::uint16_t port, int backlog = 1, rdma_port_space ps = RDMA_PS_TCP);

} // namespace rdma_samples
