/**
 * @file credits.hpp
 * @brief The sender's bookkeeping of the credit loop, as its completions tell it: a slot of the
 * receiver's ring is free again only when our WRITE into it completed (our buffer may be refilled) and
 * the receiver gave the slot back with a credit (it may be written again). Every credit and message is
 * checked as it arrives (peer_checks.hpp). sender.cpp's step 5 is the loop itself.
 */
#pragma once

#include "connection.hpp"
#include "peer_checks.hpp"
#include "protocol.hpp"

#include <rdma_samples/check.hpp>

#include <optional>
#include <string>
#include <vector>

namespace rdma_file_transfer {

/** @brief A slot of ours: free again once our WRITE into it completed and its credit came back. */
struct Slot {
    bool written = true;  ///< our last WRITE into it completed (its buffer may be refilled)
    bool credited = true; ///< the receiver gave the slot back (it may be written again)
};

/** @brief The connection as the sender's completions tell it: the slots, and the receiver's last message. */
struct Connection {
    Link link;
    std::vector<Slot> slots{};               ///< the slots in use
    std::optional<ControlMessage> message{}; ///< a message not yet read
    Turn turn = Turn::sender;                ///< Turn::receiver once we sent what it must answer (offer, done, ID)
};

/** @brief Take completions until @p ready() holds; each completion's wr_id says what it is. Every credit and
 *  message is checked as it arrives (peer_checks.hpp). Every receive points into the one message buffer:
 *  an honest receiver never has two messages in flight, and a second one is caught here, at its own
 *  completion. */
template <typename Ready>
void wait_until(Connection &conn, const std::string &what, Ready ready)
{
    while (!ready()) {
        const ibv_wc wc = next_completion(conn.link.events, what);
        if (conn.link.completed_send(wc)) // our SEND was acknowledged (checked and counted)
            continue;
        if (wc.wr_id >= write_wr_id) { // our WRITE into slot wr_id - write_wr_id was acknowledged
            rdma_samples::check_wc(wc, IBV_WC_RDMA_WRITE, "our WRITE with immediate");
            conn.slots.at(wc.wr_id - write_wr_id).written = true;
            continue;
        }
        rdma_samples::check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.wc_flags & IBV_WC_WITH_IMM) { // a credit: zero bytes, the slot in the immediate value
            const std::uint32_t slot = be32toh(wc.imm_data);
            check_credit(wc.byte_len, slot, slot < conn.slots.size() && !conn.slots[slot].credited);
            conn.slots[slot].credited = true;
        } else {
            const ControlMessage m = read_message(conn.link.msgs[0], wc.byte_len, "the receiver");
            check_answer(m, conn.turn, conn.slots, what); // (a second message finds the turn ours again)
            conn.message = m;
            conn.turn = Turn::sender;
        }
        conn.link.post_receive(); // give the receive back at once
    }
}

/** @brief After the disconnect, the completions left in the CQ: our QP is in the error state, so every
 *  receive still posted comes back flushed. One that came back whole is a message the receiver sent after
 *  its answer, which it never does: it may have overwritten the answer in the one message buffer before
 *  we read it. @param conn the connection, disconnected @throws Error naming it */
inline void check_nothing_after_answer(Connection &conn)
{
    ibv_wc wc{};
    while (rdma_samples::check_poll(ibv_poll_cq(conn.link.events.cq, 1, &wc)) == 1)
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV)
            throw Error("the receiver sent a " +
                            ((wc.wc_flags & IBV_WC_WITH_IMM)
                                 ? std::string("credit")
                                 : type_name(le16toh(conn.link.msgs[0].type)) + " message") +
                            " after its answer: the answer printed above may be that message's text (every "
                            "receive lands in one buffer)",
                        "the receiver does not follow the protocol");
}

/** @brief The receiver's next message, which must be of @p type (a refusal throws its reason). */
inline ControlMessage expect_message(Connection &conn, MessageType type, const std::string &what)
{
    wait_until(conn, what, [&] { return conn.message.has_value(); });
    const ControlMessage m = *conn.message;
    conn.message.reset();
    expect_type(m, type, "the receiver", what);
    return m;
}

} // namespace rdma_file_transfer
