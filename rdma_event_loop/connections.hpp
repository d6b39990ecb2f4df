/**
 * @file connections.hpp
 * @brief rdma_event_loop's server: one client's state (its QP, credits, deadline), the table of them,
 * and a connection's end: close it, then free its entry once its last work request has completed.
 * echo.hpp has what the loop does with a completion, server.cpp the loop itself.
 *
 * Memory never grows with what clients do: --max-clients table entries, each with --credits receive
 * slots and as many send slots of --message-size bytes, in one buffer registered once. A work
 * request's wr_id names its entry, the entry's generation (an entry is reused by later clients: a
 * completion of an earlier one is recognised and ignored) and its slot.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace rdma_event_loop {

using Clock = std::chrono::steady_clock; // CLOCK_MONOTONIC, the clock of the server's timerfd

/** @brief Where a connection's life stands. */
enum class Phase {
    accepted, ///< our REP is out; neither ESTABLISHED nor a first message seen yet (its RTU may take up to -t)
    open,     ///< ESTABLISHED seen, or its first message came (a SEND may overtake the RTU)
    flushed,  ///< its QP flushed work we did not close: on iWARP a client's disconnect (its TCP close)
              ///< reaches the QP before RDMA CM's DISCONNECTED does; waiting for that event (bounded by -t)
    closing,  ///< we disconnected and moved the QP to ERR: waiting for the flushes and the CM's answer
              ///< (bounded by close_wait(), or by its RTU's bound when not established yet)
};

/** @brief How a connection ended, for the tally: its client said goodbye, or the server dropped it. */
enum class Ending { finished, dropped };

/** @brief One client: its cm_id and QP, its credits, and where its life stands. */
struct Connection {
    rdma_samples::CmIdPtr id; ///< from its CONNECT_REQUEST; empty: the entry is free
    rdma_samples::QpPtr qp;   ///< ours, created for it
    std::uint32_t generation = 0;
    int number = 0;                                    ///< connection 0, 1, 2 ... in the order clients came
    std::string addr;                                  ///< where it connected from
    int recvs_posted = 0;                              ///< receives on its QP: the messages it may send now
    std::uint32_t sends_busy = 0;                      ///< one bit per send slot whose echo has not completed
    std::deque<std::pair<int, std::uint32_t>> waiting; ///< messages (slot, length) waiting for a send slot
    int echoed = 0;                                    ///< echoes whose SEND completed
    Phase phase = Phase::accepted;
    bool established = false;         ///< ESTABLISHED seen: its RTU came, a DREQ can go
    bool peer_left = false;           ///< its DREQ came (DISCONNECTED) before we closed
    bool cm_done = false;             ///< no more CM events will come for it (DISCONNECTED seen)
    Ending ending = Ending::finished; ///< set with outcome, when it starts closing
    std::string outcome;              ///< why it ended, as the server prints it
    Clock::time_point deadline;       ///< idle bound while open; bound of the drain while closing
    Clock::time_point rtu_by;         ///< its accept + -t: the latest its RTU may come
};

/** @brief What the whole server holds: its verbs objects, the table and the tally. */
struct Server {
    const rdma_samples::Args &args;
    const ServerOptions &opt;
    ibv_pd *pd;
    ibv_cq *cq; ///< the one CQ of every connection
    rdma_samples::Buffer &buf;
    ibv_mr *mr;
    std::vector<Connection> table; ///< --max-clients entries, made once: never more
    int arrived = 0, served = 0, dropped = 0, open = 0, most_open = 0;
    std::uint32_t generations = 0; ///< the last generation given to a connection
    long long echoed = 0;
};

/** The wr_id of a work request: entry, generation and slot (receive slots first, then send slots). */
inline std::uint64_t wr_id_of(const Connection &conn, std::size_t entry, int slot)
{
    return (std::uint64_t{conn.generation} << 32) | (entry << 8) | static_cast<std::uint64_t>(slot);
}

/** The bytes of slot @p slot of entry @p entry, in the one registered buffer. */
inline char *slot_data(const Server &server, std::size_t entry, int slot)
{
    const std::size_t slots = 2 * static_cast<std::size_t>(server.opt.credits);
    return server.buf.data() + (entry * slots + static_cast<std::size_t>(slot)) * server.opt.message_size;
}

/** How long a close waits for what it needs (the flushes, which are local, and the CM's answer to our
 *  DREQ, one round trip and the peer's wake-up): 2 s, or -t if shorter. Not -t again: the peer is told
 *  by our DREQ already, and a peer that never answers must not hold its entry for a second -t. */
inline Clock::duration close_wait(const Server &server)
{
    return std::min<Clock::duration>(std::chrono::seconds(2), std::chrono::seconds(server.args.timeout_s));
}

/** Close connection @p conn, ended as @p ending for @p why: DREQ (or the DREP to its DREQ), QP to ERR; its
 *  posted work is flushed, and release_if_done() frees the entry once the last flush has completed. */
inline void begin_close(Server &server, Connection &conn, Ending ending, const std::string &why)
{
    if (conn.phase == Phase::closing)
        return;
    conn.phase = Phase::closing;
    conn.ending = ending;
    conn.outcome = why;
    conn.deadline = Clock::now() + close_wait(server); // the drain is bounded too
    // Before its RTU (ESTABLISHED), the CM sends no DREQ: rdma_disconnect() returns 0 and sends nothing
    // (the kernel's CM is still waiting for the RTU). Its ESTABLISHED sends the DREQ then (handlers.hpp),
    // so wait for it as long as its RTU may take (a lost RTU is sent again when our REP is resent).
    if (!conn.established)
        conn.deadline = std::max(conn.deadline, conn.rtu_by);
    if (rdma_disconnect(conn.id.get()) != 0) // (its CM connection failed already: nothing to disconnect)
        conn.cm_done = true;
    rdma_samples::qp_to_error(conn.qp.get()); // every receive and send still posted completes as flushed
}

/** Free @p conn's entry once nothing of it is left: no work posted, no CM event to come (or -t passed). */
inline void release_if_done(Server &server, Connection &conn)
{
    const bool drained = conn.recvs_posted == 0 && conn.sends_busy == 0;
    if (conn.phase != Phase::closing || conn.id == nullptr ||
        !((drained && conn.cm_done) || Clock::now() >= conn.deadline))
        return;
    const bool finished = conn.ending == Ending::finished;
    rdma_samples::result("connection %d closed: %d message(s) echoed; %s", conn.number, conn.echoed,
                         conn.outcome.c_str());
    ++server.served;
    server.dropped += finished ? 0 : 1;
    --server.open;
    conn.qp.reset(); // ibv_destroy_qp(): its completions are all taken (or, past -t, stale: ignored)
    conn.id.reset(); // rdma_destroy_id(): every event of it was acknowledged already
    conn.waiting.clear();
}

} // namespace rdma_event_loop
