/**
 * @file protocol.hpp
 * @brief The TCP twin's wire format and its checks of what the peer sends: one fixed-size message,
 * versioned, little-endian, for everything but the file's bytes, which travel bare in the stream.
 *
 * The messages follow rdma_file_transfer's (../protocol.hpp): the offer (length, name), the answer (the
 * chunk size, where the RDMA receiver answers with its ring), "done" with the sender's SHA-256, the
 * verdict, and a refusal from either side. What TCP has no use for is gone: no address and rkey (nobody
 * writes into the peer's memory), no slots and credits (the kernel's receive window is the flow
 * control), no ID and key (the comparison is about moving the file). Between the answer and "done" the
 * stream carries exactly the offer's length of file bytes, with no header: TCP delivers them in order,
 * and the length frames them.
 */
#pragma once

#include "../peer_checks.hpp"
#include "../protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <endian.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace rdma_file_transfer::tcp {

using rdma_samples::Error;

inline constexpr std::uint32_t magic = 0x54434654; ///< "TCFT": not the RDMA pair's "RDFT"
inline constexpr std::uint16_t version = 1;        ///< what this build speaks

/** @brief What a Message says. */
enum class Type : std::uint16_t {
    offer = 1,   ///< sender: length, name
    accept = 2,  ///< receiver: the offer is taken; chunk: the bytes it reads and writes at a time
    refusal = 3, ///< either side: why it stops (text); the connection ends
    done = 4,    ///< sender: every byte is out; length and digest of what was sent
    verdict = 5, ///< receiver: flags 1 = the digests matched, and the digest it computed
};

/** @brief The one message of the protocol, as it travels (packed; multi-byte fields little-endian). */
struct [[gnu::packed]] Message {
    std::uint32_t magic;   ///< tcp::magic
    std::uint16_t version; ///< tcp::version of the side that wrote it
    std::uint16_t type;    ///< a Type
    std::uint64_t length;  ///< offer: the file's size in bytes; done: the bytes sent
    std::uint32_t chunk;   ///< accept: bytes per chunk
    std::uint32_t flags;   ///< verdict: 1 when the digests matched
    Digest digest;         ///< done, verdict: SHA-256
    char text[max_text];   ///< offer: the file name; refusal: why
};
static_assert(sizeof(Message) == 440, "the wire format is fixed");

/** @brief A message of @p type with @p text (cut to fit), fields in host order. */
inline Message make_message(Type type, const std::string &text = {})
{
    Message m{};
    m.magic = magic;
    m.version = version;
    m.type = static_cast<std::uint16_t>(type);
    std::memcpy(m.text, text.data(), std::min(text.size(), max_text - 1));
    return m;
}

/** @brief @p m with every number swapped between host order and wire order (little-endian); the swap
 *  is its own inverse, so it serves both ways. */
inline Message swap_numbers(Message m)
{
    m.magic = le32toh(m.magic);
    m.version = le16toh(m.version);
    m.type = le16toh(m.type);
    m.length = le64toh(m.length);
    m.chunk = le32toh(m.chunk);
    m.flags = le32toh(m.flags);
    return m;
}

/** @brief The name of message type @p type, for errors. @return e.g. "offer" */
inline std::string type_name(std::uint16_t type)
{
    static const char *const names[] = {"offer", "accept", "refusal", "done", "verdict"};
    return type >= 1 && type <= 5 ? names[type - 1] : "unknown type " + std::to_string(type);
}

/** @brief Throws unless @p m (host order, from the peer @p from) is one of ours, in our version, with
 *  its text ending inside it, and of @p type; a refusal throws the peer's reason, quoted (peer text
 *  never reaches a terminal raw). @param what what we waited for, for errors */
inline void check_message(const Message &m, Type type, const std::string &from, const std::string &what)
{
    if (m.magic != magic)
        throw Error(from + " sent " + rdma_samples::hex(m.magic) + " where a message starts; not tcp_file_transfer's",
                    "is the peer tcp_file_sender / tcp_file_receiver, on the same -lp?");
    if (m.version != version)
        throw Error(from + " speaks protocol version " + std::to_string(m.version) + "; this program speaks version " +
                        std::to_string(version),
                    "run the same release of tcp_file_sender and tcp_file_receiver on both sides");
    if (std::memchr(m.text, '\0', max_text) == nullptr)
        throw Error(from + " sent a " + type_name(m.type) + " whose text has no NUL in its " +
                        std::to_string(max_text) + " bytes",
                    "the peer does not follow the protocol");
    if (m.type == static_cast<std::uint16_t>(Type::refusal)) {
        const std::string text = m.text;
        const std::size_t nl = text.find('\n');
        throw Error(from + " refused: " + rdma_samples::quote(text.substr(0, nl), 200),
                    nl == std::string::npos ? from + "'s output says why"
                                            : from + " says: " + rdma_samples::quote(text.substr(nl + 1), 200));
    }
    if (m.type != static_cast<std::uint16_t>(type))
        throw Error(from + " sent a " + type_name(m.type) + " message while we waited for " + what,
                    "the peer does not follow the protocol");
}

/** @brief Throws unless the receiver's answer names a chunk we accept: 1 byte to max_chunk (1 GiB). The
 *  sender's buffer is the chunk, or the file's size when smaller: never more than we document. */
inline void check_accept(const Message &accept)
{
    if (accept.chunk == 0 || accept.chunk > max_chunk)
        throw Error("the receiver asks for chunks of " + std::to_string(accept.chunk) + " bytes; we send 1 to " +
                        std::to_string(max_chunk),
                    "the receiver does not follow the protocol, or its --chunk is too big");
}

/** @brief Throws unless "done" came after exactly the @p length bytes the offer announced. */
inline void check_done(const Message &done, std::uint64_t length)
{
    if (done.length != length)
        throw Error("\"done\" says " + std::to_string(done.length) + " bytes; the offer said " + std::to_string(length),
                    "the sender does not follow the protocol, or its file changed");
}

/** @brief Throws unless the receiver's @p verdict has flags 0 or 1, and agrees with itself and with
 *  @p digest, ours (the RDMA pair's check_verdict(), ../peer_checks.hpp): never success on the
 *  receiver's word alone. */
inline void check_tcp_verdict(const Message &verdict, const Digest &digest)
{
    if (verdict.flags > 1)
        throw Error("the receiver's verdict has flags " + std::to_string(verdict.flags) + "; expected 0 or 1",
                    "the receiver does not follow the protocol");
    check_verdict(verdict, digest);
}

} // namespace rdma_file_transfer::tcp
