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
 * For the pairs, `-cm` is four calls: the client posts a DescriptorReceive, calls cm_connect() and
 * waits for the descriptor; the server calls cm_accept() and send_descriptor(); both end with
 * cm_disconnect().
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/verbs.hpp>

#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rdma_samples {

/// @cond DELETERS
struct EventChannelDeleter { void operator()(rdma_event_channel *c) const { rdma_destroy_event_channel(c); } };
struct CmIdDeleter { void operator()(rdma_cm_id *id) const { rdma_destroy_id(id); } };
struct CmEventDeleter { void operator()(rdma_cm_event *e) const { rdma_ack_cm_event(e); } };
/// @endcond

using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>; ///< rdma_create_event_channel()
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;                         ///< rdma_create_id()
/** @brief An event taken with rdma_get_cm_event(); acknowledged (rdma_ack_cm_event()) when it goes. */
using CmEventPtr = std::unique_ptr<rdma_cm_event, CmEventDeleter>;

/** @brief A socket address of either family, as the CM takes it. */
struct SockAddr {
    sockaddr_storage storage{}; ///< sockaddr_in or sockaddr_in6
    /** @brief As the sockaddr the librdmacm calls take.
     *  @return a pointer to the storage */
    sockaddr *get() { return reinterpret_cast<sockaddr *>(&storage); }
};

/**
 * @brief Read `-sa` as `-sat` says, with the port `-lp`.
 *
 * ipv4: dotted quad; ipv6: IPv6 text, with `%iface` for a link-local address; gid: a GID as
 * ibv_devinfo -v prints it. On RoCE a GID is built from an IP address: ::ffff:a.b.c.d is mapped to the IPv4
 * address a.b.c.d, any other GID is used as the IPv6 address it is. (AF_IB, addressing by GID on
 * InfiniBand, is not offered: Soft-RoCE and RoCE NICs do not support it.)
 * @param text the address as typed after -sa
 * @param type how to read it (-sat)
 * @param port the RDMA CM port (-lp)
 * @return the socket address
 * @throws Error naming the text and what was expected
 */
SockAddr parse_server_addr(const std::string &text, AddrType type, std::uint16_t port);

/**
 * @brief A socket address as text: "10.77.0.1 port 13579", "[fe80::1] port 13579".
 * @param sa an IPv4 or IPv6 socket address
 * @return the text
 */
std::string addr_to_string(const sockaddr *sa);

/**
 * @brief The event name, e.g. "RDMA_CM_EVENT_REJECTED" (rdma_event_str()).
 * @param type the event type
 * @return its name
 */
std::string cm_event_name(rdma_cm_event_type type);

/**
 * @brief rdma_create_event_channel(), its fd made non-blocking so waits can be bounded.
 * @return the channel
 */
EventChannelPtr create_event_channel();

/**
 * @brief Wait for the next CM event on @p ch until @p deadline.
 * @param ch       the event channel
 * @param deadline when to give up
 * @return the event, or an empty pointer when the deadline passed first
 */
CmEventPtr next_cm_event(rdma_event_channel *ch, std::chrono::steady_clock::time_point deadline);

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
 * @brief The Error (with hint) for an unexpected or failure event while waiting for @p what.
 * @param ev   the event that arrived
 * @param what what was waited for
 * @param peer the other side, as text, for the hint
 * @return the error to throw
 */
Error cm_event_error(const rdma_cm_event &ev, const std::string &what, const std::string &peer);

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

/** @brief One RDMA CM connection: its event channel, the listening id (server) and the connected id. */
struct CmConnection {
    EventChannelPtr channel; ///< where this connection's events arrive
    CmIdPtr listen_id;       ///< the server's listening id (empty on a client)
    CmIdPtr id;              ///< the connected id
    std::string peer;        ///< the other side, as text
    ibv_qp *qp = nullptr;    ///< our QP (not the CM's): cm_disconnect() moves it to ERR
    bool disconnected = false; ///< RDMA_CM_EVENT_DISCONNECTED was seen
};

/**
 * @brief Server side of `-cm`: bind port `-lp` on every address, listen.
 * @param args      the command line (-lp)
 * @param backlog   connection requests the kernel may queue
 * @return a connection with channel and listen_id set, id empty
 */
CmConnection cm_listen(const Args &args, int backlog = 1);

/**
 * @brief Client side of `-cm`: resolve `-sa` (and its route) to a local device, check it is ours,
 * connect @p qp and wait (bounded) until the server has accepted. @p qp must be in INIT, with any
 * receive it needs already posted: the server may send the moment it has accepted.
 * @param args      the command line (-sa, -sat, -lp, -t)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT
 * @param initiator_depth READs/atomics this side will have in flight at the server (0 when none);
 *                  the server must grant at least this many, or the connection is an error
 * @return the connected connection
 */
CmConnection cm_connect(const Args &args, const Device &dev, ibv_qp *qp, int initiator_depth = 0);

/**
 * @brief Server side of `-cm` for one client: listen on `-lp`, take the first connection request
 * (bounded by -t), move @p qp to RTR and RTS, accept, wait until established.
 * @param args      the command line (-lp, -t)
 * @param dev       the device this side opened
 * @param qp        our QP, in INIT, with its receives posted
 * @param responder_resources READs/atomics the client may have in flight at us (0 when none); the
 *                  server grants no more than the client's REQ asked for (its initiator depth)
 * @return the accepted connection
 */
CmConnection cm_accept(const Args &args, const Device &dev, ibv_qp *qp, int responder_resources = 0);

/**
 * @brief Orderly goodbye: rdma_disconnect() (the CM sends DREQ; the peer answers DREP), wait, bounded,
 * for RDMA_CM_EVENT_DISCONNECTED, then move our QP to ERR. Either side may start it; both may.
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
 * @brief A receive for the peer's descriptor text (an mmap or sync-event descriptor), sent in-band.
 *
 * With `-cm` there are no files: right after the connection, the responder SENDs the same text
 * format_descriptor() writes to a file. The requester posts this receive BEFORE connecting, so the
 * SEND always finds it (no RNR).
 */
class DescriptorReceive {
public:
    /**
     * @brief Register a buffer (local write: the device writes the message into it) and post it.
     * @param pd our protection domain
     * @param qp our QP, in INIT or later
     */
    DescriptorReceive(ibv_pd *pd, ibv_qp *qp);
    /**
     * @brief Wait (bounded) for the receive's completion (wr_id descriptor_wr_id).
     * @param done      the QP's CQ's completions
     * @param timeout_s the bound
     * @return the text received
     */
    std::string wait(Completions &done, int timeout_s);

private:
    Buffer buf_;
    MrPtr mr_;
};

/**
 * @brief SEND @p text (a descriptor) on the connected @p qp and wait for its completion.
 * The peer may answer (its goodbye SEND, say) before this SEND's ACK comes back: its message then
 * completes first, and @p done keeps it for the wait that wants it.
 * @param pd,qp      our protection domain and QP
 * @param done       the QP's CQ's completions (wr_id descriptor_wr_id)
 * @param text       what format_descriptor() returned
 * @param timeout_s  bound for the completion
 */
void send_descriptor(ibv_pd *pd, ibv_qp *qp, Completions &done, const std::string &text, int timeout_s);

/** @brief One client of a server that takes many (rdma_multi_conn): its cm_id and how it fares. */
struct CmClient {
    CmIdPtr id;                ///< from its CONNECT_REQUEST; empty until the client arrived
    ibv_qp *qp = nullptr;      ///< the server's QP for it: disconnect_clients() moves it to ERR
    std::string addr;          ///< where it connected from
    bool established = false;  ///< RDMA_CM_EVENT_ESTABLISHED seen
    bool done = false;         ///< its message went through
    bool disconnected = false; ///< RDMA_CM_EVENT_DISCONNECTED seen
    std::string lost;          ///< why it failed, or empty
};

/**
 * @brief The index of the client whose cm_id is @p id.
 * @param clients all clients
 * @param id      the cm_id of an event
 * @return the index, or -1
 */
int find_client(const std::vector<CmClient> &clients, const rdma_cm_id *id);

/**
 * @brief Refuse a connection request the server has no room for (the client sees REJECTED).
 * @param request the CONNECT_REQUEST event
 */
void reject_request(CmEventPtr request);

/**
 * @brief Disconnect every client still connected and wait (bounded) until the CM confirms each; then
 * move every client's QP to ERR, as cm_disconnect() does.
 * @param ch        the server's event channel
 * @param clients   all clients
 * @param timeout_s the bound
 */
void disconnect_clients(rdma_event_channel *ch, std::vector<CmClient> &clients, int timeout_s);

/** @brief Largest in-band descriptor, in bytes. */
inline constexpr std::size_t max_descriptor_text = 1024;

} // namespace rdma_samples
