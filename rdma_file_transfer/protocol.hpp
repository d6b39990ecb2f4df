/**
 * @file protocol.hpp
 * @brief rdma_file_transfer's control protocol, the wire format: one fixed-size message, versioned, in
 * little-endian, and how messages and credits are posted. What a message from the peer must pass before
 * any of its fields is used is in peer_checks.hpp.
 *
 * Everything the two sides say to each other besides the file's bytes is a ControlMessage SENT into a
 * receive the peer posted: the offer (length, name), the ring (addr, rkey, chunk, slots), "done" (length,
 * digest), the verdict, the ID and the key. A message is always the same 456 bytes, so one receive
 * buffer of that size fits any of them. Credits carry no bytes at all: they are zero-length SENDs whose
 * immediate value names the slot.
 *
 * A message starts with a magic number and the protocol version. A peer that speaks another version
 * is refused with a message it can still read: magic, version and type keep their place in every
 * version to come.
 *
 * Version 2 (this one) sends the digest with "done", after the data, so that each side hashes the file
 * once, while the bytes move; version 1 sent it in the offer, so the sender read the whole file twice
 * and the receiver waited for that first pass before the first byte came.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <endian.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace rdma_file_transfer {

inline constexpr std::uint32_t protocol_magic = 0x52444654; ///< "RDFT"
inline constexpr std::uint16_t protocol_version = 2;        ///< what this build speaks
inline constexpr std::size_t max_text = 384;                ///< bytes of text a message carries (with its NUL)
inline constexpr std::uint32_t max_chunk = 1U << 30;        ///< the largest slot either side accepts (1 GiB)
inline constexpr std::uint64_t max_ring_bytes = 1ULL << 30; ///< the largest ring (slots x chunk) either side accepts

/** @brief What a ControlMessage says. */
enum class MessageType : std::uint16_t {
    offer = 1,   ///< sender: length, name (workflow step 2)
    ring = 2,    ///< receiver: addr, rkey, chunk, slots of the ring (step 3)
    refusal = 3, ///< either side: why it stops (text); the connection ends
    verdict = 4, ///< receiver: flags 1 = the digest matched (step 5), and the digest it computed
    id = 5,      ///< sender: who it is (step 6)
    key = 6,     ///< receiver: the secret key for that ID (step 7)
    receipt = 7, ///< receiver without --keys: a receipt instead of a key (step 7)
    done = 8,    ///< sender: every chunk is out; length and digest of what was sent (step 4)
};

/** @brief Whose message comes next. The protocol has one message in flight at a time, each the answer
 *  to the other side's (credits are not messages): the sender keeps the turn (credits.hpp) to tell an
 *  answer from a message the receiver did not owe. */
enum class Turn {
    sender,   ///< the receiver owes no message: one now breaks the protocol (a refusal aside)
    receiver, ///< the sender sent what the receiver must answer (offer, done, ID)
};

/** @brief The name of message type @p type, for errors. @param type as received @return e.g. "offer" */
inline std::string type_name(std::uint16_t type)
{
    static const char *const names[] = {"offer", "ring", "refusal", "verdict", "id", "key", "receipt", "done"};
    if (type >= 1 && type <= 8)
        return names[type - 1];
    return "unknown type " + std::to_string(type);
}

using Digest = std::array<std::uint8_t, 32>; ///< a SHA-256 digest

/** @brief @p d in lower-case hex, as sha256sum prints it. @param d the digest @return 64 characters */
inline std::string hex(const Digest &d)
{
    std::string s;
    char two[3];
    for (std::uint8_t b : d) {
        std::snprintf(two, sizeof two, "%02x", b);
        s += two;
    }
    return s;
}

/** @brief The one message of the protocol, as it travels (packed; multi-byte fields little-endian). */
struct [[gnu::packed]] ControlMessage {
    std::uint32_t magic;                 ///< protocol_magic
    std::uint16_t version;               ///< protocol_version of the side that wrote it
    std::uint16_t type;                  ///< a MessageType
    std::uint64_t length;                ///< offer: the file's size in bytes; done: the bytes sent
    std::uint64_t addr;                  ///< ring: the ring's first byte in the receiver's memory
    std::uint32_t rkey;                  ///< ring: the key that lets our WRITEs in
    std::uint32_t chunk;                 ///< ring: bytes per slot
    std::uint32_t slots;                 ///< ring: how many slots
    std::uint32_t flags;                 ///< verdict: 1 when the digests matched
    std::array<std::uint8_t, 32> digest; ///< done, verdict: SHA-256
    char text[max_text];                 ///< offer: the file name; refusal: why; id; key; receipt
};
static_assert(sizeof(ControlMessage) == 456, "the wire format is fixed");

/** @brief A message of @p type with @p text (cut to fit), in this build's version. */
inline ControlMessage make_message(MessageType type, const std::string &text = {})
{
    ControlMessage m{};
    m.magic = htole32(protocol_magic);
    m.version = htole16(protocol_version);
    m.type = htole16(static_cast<std::uint16_t>(type));
    std::memcpy(m.text, text.data(), std::min(text.size(), max_text - 1));
    return m;
}

/** @brief @p m with its numbers swapped between wire order (little-endian) and host order. The
 *  swap is its own inverse, so it serves both ways; magic, version and type stay as they are. */
inline ControlMessage swap_numbers(ControlMessage m)
{
    m.length = le64toh(m.length);
    m.addr = le64toh(m.addr);
    m.rkey = le32toh(m.rkey);
    m.chunk = le32toh(m.chunk);
    m.slots = le32toh(m.slots);
    m.flags = le32toh(m.flags);
    return m;
}

/// @name The receiver's queues for a ring of @p slots: what check_ring_fits() (support/options.hpp) checks
/// and accept uses
/// @{
/** @brief Receives: one per slot (each WRITE with immediate consumes one), one for a message, one spare. */
inline std::uint32_t receiver_recv_depth(std::uint32_t slots)
{
    return slots + 2;
}
/** @brief SENDs: a credit per slot, and the messages (at most 2 in flight: a verdict or key, a refusal). */
inline std::uint32_t receiver_send_depth(std::uint32_t slots)
{
    return slots + 4;
}
/// @}

/// @name wr_ids: what each completion belongs to
/// @{
inline constexpr std::uint64_t recv_wr_id = 1;           ///< every receive (they complete in the order posted)
inline constexpr std::uint64_t send_wr_id = 2;           ///< every SEND: a message or a credit
inline constexpr std::uint64_t write_wr_id = 1ULL << 32; ///< sender's WRITE with immediate into slot s: write_wr_id + s
/// @}

/** @brief Post @p n receives (wr_id recv_wr_id), all into the one message buffer @p msg: the protocol
 *  has at most one message in flight each way, and credits carry no bytes. */
inline void post_receives(ibv_qp *qp, std::uint32_t n, ControlMessage *msg, std::uint32_t lkey)
{
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(msg), sizeof *msg, lkey};
    for (std::uint32_t i = 0; i < n; ++i) {
        ibv_recv_wr wr{};
        wr.wr_id = recv_wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        rdma_samples::check_post(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
    }
}

/** @brief SEND: @p msg (put in wire order into @p buf, registered with @p lkey), or, with @p buf
 *  nullptr, a zero-length SEND whose immediate value @p imm is the whole message (a credit). */
inline void post_send(ibv_qp *qp, ControlMessage *buf, std::uint32_t lkey, const ControlMessage &msg,
                      std::uint32_t imm = 0)
{
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), sizeof *buf, lkey};
    ibv_send_wr wr{};
    wr.wr_id = send_wr_id;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (buf != nullptr) {
        *buf = swap_numbers(msg);
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &sge;
        wr.num_sge = 1;
    } else {
        wr.opcode = IBV_WR_SEND_WITH_IMM; // no bytes: the immediate value says it all
        wr.imm_data = htobe32(imm);       // immediate data travels in network byte order
    }
    ibv_send_wr *bad = nullptr;
    rdma_samples::check_post(ibv_post_send(qp, &wr, &bad), "ibv_post_send(SEND)");
}

} // namespace rdma_file_transfer
