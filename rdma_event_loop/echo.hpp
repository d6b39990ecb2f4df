/**
 * @file echo.hpp
 * @brief rdma_event_loop's server: what the loop does with a completion. A message is echoed with its
 * receive posted again first (the credit goes back with the echo); an echo's completion frees its send
 * slot for a message that waits; a failed one closes its connection (connections.hpp).
 */
#pragma once

#include "connections.hpp"

#include <rdma_samples/check.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace rdma_event_loop {

/** Post receive slot @p slot of entry @p entry: one credit more for its client. */
inline void post_receive(Server &server, std::size_t entry, int slot)
{
    Connection &conn = server.table[entry];
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(slot_data(server, entry, slot)),
                static_cast<std::uint32_t>(server.opt.message_size), server.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id_of(conn, entry, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    rdma_samples::check_post(ibv_post_recv(conn.qp.get(), &wr, &bad_wr), "ibv_post_recv");
    ++conn.recvs_posted;
}

/** Echo the message in receive slot @p recv_slot, if a send slot is free; else it waits its turn. */
inline void echo(Server &server, std::size_t entry, int recv_slot, std::uint32_t len)
{
    Connection &conn = server.table[entry];
    int free_slot = -1;
    for (int i = 0; i < server.opt.credits && free_slot < 0; ++i)
        if (!(conn.sends_busy & (1U << i)))
            free_slot = i;
    if (free_slot < 0) { // every echo still in flight (ACKs late): this message keeps its receive for now
        conn.waiting.emplace_back(recv_slot, len);
        return;
    }
    //! [echo]
    // Copy the message out and post its receive again BEFORE the echo leaves: the client may send its
    // next message the moment the echo arrives, and that message must find a receive (no RNR NAK).
    const int send_slot = server.opt.credits + free_slot;
    std::memcpy(slot_data(server, entry, send_slot), slot_data(server, entry, recv_slot), len);
    post_receive(server, entry, recv_slot);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(slot_data(server, entry, send_slot)), len, server.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id_of(conn, entry, send_slot);
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED; // its completion frees the send slot
    ibv_send_wr *bad_wr = nullptr;
    rdma_samples::check_post(ibv_post_send(conn.qp.get(), &wr, &bad_wr), "ibv_post_send(echo)");
    conn.sends_busy |= 1U << free_slot;
    //! [echo]
}

/** echo(), but a post that fails closes this connection only, not the server. */
inline void echo_or_close(Server &server, std::size_t entry, int recv_slot, std::uint32_t len)
{
    try {
        echo(server, entry, recv_slot, len);
    } catch (const rdma_samples::Error &e) {
        begin_close(server, server.table[entry], Ending::dropped, std::string("dropped: ") + e.what());
    }
}

/** One completion from the shared CQ: find its connection by wr_id, then echo, count or close. */
inline void on_completion(Server &server, const ibv_wc &wc)
{
    const std::size_t entry = (wc.wr_id >> 8) & 0xffffff;
    const int slot = static_cast<int>(wc.wr_id & 0xff);
    if (entry >= server.table.size() || server.table[entry].generation != (wc.wr_id >> 32) || !server.table[entry].id)
        return; // a completion of an earlier client of this entry, released after -t: ignore it
    Connection &conn = server.table[entry];
    const bool receive = slot < server.opt.credits;
    if (receive)
        --conn.recvs_posted;
    else
        conn.sends_busy &= ~(1U << (slot - server.opt.credits));
    if (wc.status == IBV_WC_WR_FLUSH_ERR && conn.phase != Phase::closing) {
        // Flushed, and not by us: the QP went to ERR on its own. With no error completion before it, that
        // is the client's disconnect on iWARP, whose CM event is still to come: it says how this ends.
        if (conn.phase != Phase::flushed)
            conn.deadline = Clock::now() + std::chrono::seconds(server.args.timeout_s);
        conn.phase = Phase::flushed;
    } else if (wc.status != IBV_WC_SUCCESS) { // (flushes are expected while closing)
        begin_close(server, conn, Ending::dropped,
                    std::string("dropped: its ") + (receive ? "receive" : "echo") + " completed with " +
                        rdma_samples::wc_status_name(wc.status) + " (" + ibv_wc_status_str(wc.status) + ")");
    } else if (receive && (conn.phase == Phase::accepted || conn.phase == Phase::open)) {
        conn.phase = Phase::open;
        conn.deadline = Clock::now() + std::chrono::seconds(server.args.timeout_s); // it is alive: -t again
        echo_or_close(server, entry, slot, wc.byte_len); // byte_len <= message_size: a longer SEND fails instead
    } else if (!receive) {
        ++conn.echoed;
        ++server.echoed;
        if (!conn.waiting.empty() && conn.phase == Phase::open) {
            const auto [next, len] = conn.waiting.front();
            conn.waiting.pop_front();
            echo_or_close(server, entry, next, len);
        }
    }
    if (conn.peer_left && conn.sends_busy == 0 && conn.waiting.empty())
        begin_close(server, conn, Ending::finished,
                    "the client disconnected"); // its last echo is through: answer its DREQ
    release_if_done(server, conn);
}

} // namespace rdma_event_loop
