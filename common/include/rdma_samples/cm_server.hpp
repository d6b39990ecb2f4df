/**
 * @file cm_server.hpp
 * @brief The bookkeeping of an RDMA CM server for many clients, one QP each (rdma_multi_conn).
 *
 * The server's lesson, its loop over CM events (CONNECT_REQUEST -> rdma_accept() or rdma_reject(),
 * ESTABLISHED, DISCONNECTED, rdma_ack_cm_event()), is written out in rdma_multi_conn: sender.cpp, and
 * server.hpp, the receiver's loop, around the receivers' switch (multi_receive.hpp).
 * What is kept here is not the lesson: which client has which QP, how each connection fares, when a
 * client's disconnect may be answered, and the final tally.
 */
#pragma once

#include <rdma_samples/cm.hpp>
#include <rdma_samples/verbs.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace rdma_samples {

/** @brief One client of the server and how it fares. */
struct CmClient {
    /// from its CONNECT_REQUEST; empty until the client arrived, and once its DREQ is answered
    CmIdPtr id;
    ibv_qp *qp = nullptr;      ///< the server's QP for it
    std::string addr;          ///< where it connected from
    bool established = false;  ///< the connection is up (ESTABLISHED seen, or its first message arrived)
    bool done = false;         ///< its message went through
    bool disconnected = false; ///< the client asked to disconnect (DREQ), or the CM reported it gone
    bool answered = false;     ///< we have called rdma_disconnect() for it (our DREP, or our DREQ)
    std::string lost;          ///< why it failed, or empty
};

/** @brief The longest reason refuse_request() sends, its NUL included: an IB REJ has 148 bytes of
 *  private data, an iWARP MPA reject 512; the client reads it up to its first NUL (cm_connect()). */
inline constexpr std::size_t max_reject_reason = 100;

/**
 * @brief Refuse a client's CONNECT_REQUEST (the client sees RDMA_CM_EVENT_REJECTED, with @p reason in
 * the REJ's private data, cut to max_reject_reason bytes with its NUL), then destroy the request's new
 * cm_id. The reject is best effort: a client that gave up its request first is only reported (a line),
 * its cm_id destroyed all the same, and the caller goes on. Its event must be acknowledged already (rdma_destroy_id() waits until it is): the event loop
 * acknowledges every event at once; the form below takes the event and does it.
 * @param id     the cm_id the CONNECT_REQUEST came with; destroyed afterwards
 * @param reason why, for the client to print; empty: no private data
 */
void refuse_request(rdma_cm_id *id, const std::string &reason = {});

/**
 * @brief As above, for a request whose event @p ev is still held: acknowledged, then refused.
 * @param ev the request; empty afterwards @param reason why, or empty
 */
void refuse_request(CmEventPtr &ev, const std::string &reason = {});

/** @brief The clients of one listening server: client i gets QP i. */
class CmClients {
public:
    /** @brief One client slot per QP. @param qps one QP per client, each in INIT with its receives posted */
    explicit CmClients(const std::vector<QpPtr> &qps);
    /**
     * @brief Give the next free QP to the client of a CONNECT_REQUEST; it owns @p id from now on.
     * @param id the new cm_id the request came with
     * @return its connection number, or -1 when every QP is taken (reject the request)
     */
    int admit(rdma_cm_id *id);
    /** @brief The connection whose cm_id is @p id. @param id an event's id @return it, or -1 */
    int find(const rdma_cm_id *id) const;
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
    /**
     * @brief The client of @p conn disconnected (DREQ) or the CM gave up on it. Its DREQ is answered
     * (rdma_disconnect()) only once its connection is finished: until then our QP must stay, to
     * finish a SEND whose ACK was lost. Answering destroys the client's cm_id (a repeated DREQ is
     * then answered by the kernel): acknowledge its event first.
     * @param conn the connection
     */
    void mark_disconnected(int conn);
    /** @brief Whether every connection is through, done or lost.
     *  @return true when there is nothing left to wait for */
    bool all_finished() const;
    /** @brief The client of connection @p conn. @param conn the connection @return it */
    const CmClient &client(int conn) const { return clients_[static_cast<std::size_t>(conn)]; }
    /**
     * @brief The end: wait (bounded) for the DREQ of every client whose message went through (the
     * client disconnects), then disconnect every client still connected, wait (bounded) for the CM to
     * confirm, move every QP to ERR; then throw unless every connection's message went through.
     * @param listener     the listening connection, whose channel carries every client's events
     * @param timeout_s    the bound (-t)
     * @param peer         what a client is, singular, e.g. "sender"
     * @param outcome      what each success is, e.g. "messages arrived"
     * @param hint_missing the hint when fewer clients came than expected (-nc)
     * @param hint_failed  the hint when every client came but some failed
     */
    void finish(CmConnection &listener, int timeout_s, const std::string &peer, const std::string &outcome,
                const std::string &hint_missing, const std::string &hint_failed);

private:
    void answer_if_finished(CmClient &c);
    void answer_dreq(CmClient &c);
    std::vector<CmClient> clients_;
    int arrived_ = 0;
};

} // namespace rdma_samples
