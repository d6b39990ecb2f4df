/**
 * @file cm_server.hpp
 * @brief An RDMA CM server for many clients, one QP each (rdma_multi_conn's two programs).
 *
 * The server's side of RDMA CM is a loop over events: a CONNECT_REQUEST is accepted onto the next free
 * QP, ESTABLISHED says a connection is up, DISCONNECTED (or an error event) says a client went away.
 * CmServer does the CM's part of that bookkeeping and reports what happened; what a program does
 * with a connection (post a SEND, print a message) stays in the program, with its own ibv_post_send()
 * and ibv_poll_cq().
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/verbs.hpp>

#include <string>
#include <vector>

namespace rdma_samples {

/** @brief One client of a CmServer and how it fares. */
struct CmClient {
    CmIdPtr id;                ///< from its CONNECT_REQUEST; empty until the client arrived
    ibv_qp *qp = nullptr;      ///< the server's QP for it
    std::string addr;          ///< where it connected from
    bool established = false;  ///< the connection is up (ESTABLISHED seen, or its first message arrived)
    bool done = false;         ///< its message went through
    bool disconnected = false; ///< the client asked to disconnect (DREQ), or the CM reported it gone
    bool answered = false;     ///< we have called rdma_disconnect() for it (our DREP, or our DREQ)
    std::string lost;          ///< why it failed, or empty
};

/** @brief What CmServer::next() saw. */
struct CmServerEvent {
    /** @brief The kinds of news. */
    enum class Kind {
        nothing,     ///< no event within the wait (or one that changes nothing here)
        accepted,    ///< a client's CONNECT_REQUEST was accepted onto QP conn
        established, ///< connection conn is up (first time only)
        gone,        ///< the client of connection conn disconnected or failed (event names how)
    };
    Kind kind = Kind::nothing; ///< what happened
    int conn = -1;             ///< which connection (index of its QP)
    std::string event;         ///< the CM event's name, e.g. "RDMA_CM_EVENT_DISCONNECTED"
};

/** @brief Listen on `-lp` and serve up to one client per QP. */
class CmServer {
public:
    /**
     * @brief Bind `-lp` on every address and listen; client i will get @p qps[i].
     * @param args -lp, -t
     * @param dev  the device this side opened (a client must reach it through the same one)
     * @param qps  one QP per client, each in INIT with its receives posted
     */
    CmServer(const Args &args, const Device &dev, const std::vector<QpPtr> &qps);

    /**
     * @brief Take the next CM event, waiting at most @p wait_ms: accept a connection request onto the
     * next QP (moving it to RTR and RTS), or reject it when every QP is taken; note ESTABLISHED and
     * departures. A client's disconnect is answered only once its connection is finished (mark_done(),
     * mark_lost()): until then our QP must stay, to finish a SEND whose ACK was lost.
     * @param wait_ms how long to wait for an event
     * @return what happened
     */
    CmServerEvent next(int wait_ms);

    /**
     * @brief Connection @p conn is up: its first completion can overtake the ESTABLISHED event.
     * @param conn the connection
     * @return true the first time (print it), false after
     */
    bool mark_established(int conn);

    /** @brief Connection @p conn's message went through; a client that asked to disconnect is
     *  answered now. @param conn the connection */
    void mark_done(int conn);

    /**
     * @brief Connection @p conn failed, for the reason given (the first reason is kept, and said once).
     * @param conn the connection
     * @param why  what happened, e.g. "its receive completed with IBV_WC_WR_FLUSH_ERR"
     */
    void mark_lost(int conn, const std::string &why);

    /** @brief Whether every connection is through, done or lost.
     *  @return true when there is nothing left to wait for */
    bool all_finished() const;

    /** @brief The client of connection @p conn. @param conn the connection @return it */
    const CmClient &client(int conn) const { return clients_[static_cast<std::size_t>(conn)]; }

    /**
     * @brief The end: disconnect every client still connected, wait (bounded) for the CM to confirm,
     * move every QP to ERR; then throw unless every connection's message went through.
     * @param peer         what a client is, singular, e.g. "sender"
     * @param outcome      what each success is, e.g. "messages arrived"
     * @param hint_missing the hint when fewer clients came than expected (-nc)
     * @param hint_failed  the hint when every client came but some failed
     */
    void finish(const std::string &peer, const std::string &outcome, const std::string &hint_missing,
                const std::string &hint_failed);

private:
    void answer_if_finished(CmClient &c);
    CmConnection listener_;
    const Device &dev_;
    std::vector<CmClient> clients_;
    int arrived_ = 0;
    int timeout_s_;
};

} // namespace rdma_samples
