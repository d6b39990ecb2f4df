/**
 * @file peer_checks.hpp
 * @brief rdma_file_transfer's checks of what the peer sends, before any of it is used. Everything a
 * peer sends is input, as hostile as a file: magic, version, length and text of every message
 * (read_message()), its type in turn (expect_type()); the sender's chunks, slot and length
 * (check_chunk()), and its "done" (check_done()); the receiver's ring (bad_ring()), credits
 * (check_credit()), answers (check_answer()) and verdict (check_verdict()). The HCA checks only that a
 * WRITE stays inside the rkey's region; everything else is the program's job. Each check throws an
 * Error that names the lie (bad_ring() returns it: the sender refuses the ring, the receiver hears why);
 * tests/rogue/ holds a peer that tells each one.
 */
#pragma once

#include "protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <optional>
#include <string>

namespace rdma_file_transfer {

using rdma_samples::Error;
using rdma_samples::quote;

/// @name Every message, on both sides
/// @{
/** @brief The host's view of a message received in @p wire; throws unless it is ours and whole.
 *  @param wire the bytes as received @param byte_len how many arrived (wc.byte_len)
 *  @param from who sent it, for messages @return the message, fields in host order */
inline ControlMessage read_message(const ControlMessage &wire, std::uint32_t byte_len, const std::string &from)
{
    ControlMessage m = swap_numbers(wire);
    m.magic = le32toh(m.magic);
    m.version = le16toh(m.version);
    m.type = le16toh(m.type);
    if (byte_len < 8 || m.magic != protocol_magic)
        throw Error(from + " sent a message that is not rdma_file_transfer's (" + std::to_string(byte_len) + " bytes)",
                    "is the peer rdma_file_sender / rdma_file_receiver, on the same -lp?");
    if (m.version != protocol_version)
        throw Error(from + " speaks protocol version " + std::to_string(m.version) + "; this program speaks version " +
                        std::to_string(protocol_version),
                    "run the same release of rdma_file_sender and rdma_file_receiver on both sides");
    if (byte_len != sizeof(ControlMessage))
        throw Error(from + " sent a " + std::to_string(byte_len) + "-byte message; version " +
                        std::to_string(protocol_version) + " messages are " + std::to_string(sizeof(ControlMessage)),
                    "the peer is not a matching rdma_file_transfer program");
    if (std::memchr(m.text, '\0', max_text) == nullptr) // text is printed and compared: it must end inside
        throw Error(from + " sent a " + type_name(m.type) + " whose text has no NUL in its " +
                        std::to_string(max_text) + " bytes",
                    "the peer does not follow the protocol");
    return m;
}

/** @brief Throws unless @p m is of @p type; a refusal ends the connection with the peer's reason,
 *  quoted (peer text never reaches a terminal raw). @param m a message from read_message()
 *  @param type what the protocol expects now @param from who sent it @param what the step, for errors */
inline void expect_type(const ControlMessage &m, MessageType type, const std::string &from, const std::string &what)
{
    if (m.type == static_cast<std::uint16_t>(MessageType::refusal)) {
        const std::string text = m.text;
        const std::size_t nl = text.find('\n');
        throw Error(from + " refused: " + quote(text.substr(0, nl), 200),
                    nl == std::string::npos ? from + "'s output says why"
                                            : from + " says: " + quote(text.substr(nl + 1), 200));
    }
    if (m.type != static_cast<std::uint16_t>(type))
        throw Error(from + " sent a " + type_name(m.type) + " message while we waited for " + what,
                    "the peer does not follow the protocol");
}

/// @}

/// @name What the sender sends, checked by the receiver
/// @{
/** @brief Throws unless @p wc, which came while we waited for @p what, is a message: a chunk (WRITE
 *  with immediate) or a SEND with immediate is out of turn there. */
inline void check_is_message(const ibv_wc &wc, const std::string &what)
{
    if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_IMM))
        throw Error("the sender sent " +
                        std::string(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? "a WRITE with immediate"
                                                                           : "a SEND with immediate") +
                        " while we waited for " + what,
                    "the sender does not follow the protocol");
}

/** @brief The slot that chunk @p wc (a WRITE with immediate, the slot in its immediate value) filled;
 *  throws unless it is one of the ring's @p slots and the chunk is as long as the offer's @p length
 *  leaves after @p received bytes: @p chunk bytes, fewer at the end, none after it. */
inline std::uint32_t check_chunk(const ibv_wc &wc, std::uint32_t slots, std::uint32_t chunk, std::uint64_t received,
                                 std::uint64_t length)
{
    const std::uint32_t slot = be32toh(wc.imm_data);
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        throw Error("the sender sent a SEND with immediate " + rdma_samples::hex(slot) +
                        "; it sends chunks and messages only",
                    "the sender does not follow the protocol");
    const std::uint64_t expected = std::min<std::uint64_t>(chunk, length - received);
    if (slot >= slots || wc.byte_len != expected || expected == 0)
        throw Error("a WRITE of " + std::to_string(wc.byte_len) + " bytes into slot " + std::to_string(slot) +
                        " after " + std::to_string(received) + " of " + std::to_string(length) + " bytes; expected " +
                        std::to_string(expected) + " bytes into one of " + std::to_string(slots) + " slots" +
                        (expected == 0 ? " (no more chunks)" : ""),
                    "the sender does not follow the protocol");
    return slot;
}

/** @brief Throws unless "done" came after exactly the @p length bytes the offer announced, and says so. */
inline void check_done(const ControlMessage &done, std::uint64_t received, std::uint64_t length)
{
    if (done.length != length || received != length)
        throw Error("\"done\" after " + std::to_string(received) + " bytes (it says " + std::to_string(done.length) +
                        "); the offer said " + std::to_string(length),
                    "the sender does not follow the protocol, or its file changed");
}
/// @}

/// @name What the receiver sends, checked by the sender
/// @{
/** @brief Why the receiver's @p ring cannot be used (an empty slot, more than we accept, an address range
 *  that wraps), or nothing when it can: the sender allocates its buffers from the ring's geometry. */
inline std::optional<Error> bad_ring(const ControlMessage &ring)
{
    const auto offers = [](const std::string &what) {
        return Error("the receiver offers " + what,
                     "the receiver does not follow the protocol, or its --slots/--chunk are too big");
    };
    if (ring.slots == 0 || ring.chunk == 0)
        return offers("a ring of " + std::to_string(ring.slots) + " slots of " + std::to_string(ring.chunk) + " bytes");
    if (ring.chunk > max_chunk || std::uint64_t{ring.slots} * ring.chunk > max_ring_bytes)
        return offers("a ring of " + std::to_string(ring.slots) + " x " + std::to_string(ring.chunk) +
                      " bytes; we accept chunks of at most " + std::to_string(max_chunk) + " and rings of at most " +
                      std::to_string(max_ring_bytes) + " bytes");
    if (ring.addr > UINT64_MAX - std::uint64_t{ring.slots} * ring.chunk)
        return offers("a ring at addr " + rdma_samples::hex(ring.addr) + " that wraps around the address space");
    return std::nullopt;
}

/** @brief Throws unless a credit (@p byte_len bytes, naming @p slot) returns a slot the receiver
 *  @p holds: one we wrote and it has not given back yet. */
inline void check_credit(std::uint32_t byte_len, std::uint32_t slot, bool holds)
{
    if (byte_len != 0 || !holds)
        throw Error("the receiver returned slot " + std::to_string(slot) + " (" + std::to_string(byte_len) +
                        " bytes), which is not one we wrote and it still holds",
                    "the receiver does not follow the protocol");
}

/** @brief Throws unless message @p m may come now, while we wait for @p what. The protocol has one
 *  message in flight at a time, each the answer to ours: @p turn is Turn::receiver once we sent what it
 *  answers. An honest receiver credits every chunk before it answers "done", and on RC our receives
 *  complete in the order it sent: a message while it holds one of @p slots (each with .credited) came
 *  too early. A refusal throws its reason. */
template <typename Slots>
void check_answer(const ControlMessage &m, Turn turn, const Slots &slots, const std::string &what)
{
    if (m.type == static_cast<std::uint16_t>(MessageType::refusal))
        expect_type(m, MessageType::refusal, "the receiver", what); // throws its reason
    if (turn != Turn::receiver)
        throw Error("the receiver sent a " + type_name(m.type) + " message while we waited for " + what +
                        "; it owed us no message then",
                    "the receiver does not follow the protocol");
    for (std::size_t slot = 0; slot < slots.size(); ++slot)
        if (!slots[slot].credited)
            throw Error("the receiver sent a " + type_name(m.type) + " message while it still held slot " +
                            std::to_string(slot) + ": it answered before it had all the data",
                        "the receiver does not follow the protocol");
}

/** @brief Throws unless @p verdict (flags 0 or 1) agrees with itself and with @p digest, ours: never
 *  success on the receiver's word alone. (A template: the TCP twin's verdict, tcp/protocol.hpp, has
 *  the same two fields.) */
template <typename Verdict>
void check_verdict(const Verdict &verdict, const Digest &digest)
{
    if (verdict.flags == 1 && verdict.digest != digest)
        throw Error("the receiver says the digests match, but it computed " + hex(verdict.digest) + ", not our " +
                        hex(digest) + ": not trusted",
                    "the receiver does not follow the protocol; do not rely on its copy");
    if (verdict.flags == 0 && verdict.digest == digest)
        throw Error("the receiver computed our digest " + hex(digest) + ", yet says they differ",
                    "the receiver does not follow the protocol");
    if (verdict.flags == 0)
        throw Error("the receiver computed " + hex(verdict.digest) + ", not " + hex(digest) + ": the data was damaged",
                    "nothing was kept on the receiver; send the file again");
}
/// @}

} // namespace rdma_file_transfer
