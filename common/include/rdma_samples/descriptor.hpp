/**
 * @file descriptor.hpp
 * @brief Connection and resource descriptors: small key=value text files the two sides exchange.
 *
 * A connection descriptor tells the peer how to reach this side's queue pair (QPN, PSN, LID, GID,
 * MTU). A resource descriptor tells it where this side's exported memory is (addr, length, rkey) and
 * what it may do there. They are text so that a learner can `cat` one:
 *
 *     # rdma-samples connection descriptor
 *     version=1
 *     kind=connection
 *     nonce=0x6b1f0c22d5e3a871
 *     qp_num=0x000011
 *     psn=0x5d8c19
 *     lid=0x0000
 *     gid=::ffff:10.77.0.1
 *     mtu=1024
 *
 * This header is the format: formatting and strict parsing, which rejects anything malformed with the
 * source's name, the line and what was expected. descriptor_file.hpp reads and writes the files.
 *
 * Nonces tell a live peer from a file left by an earlier run: the requester publishes a fresh nonce;
 * the responder answers with `peer_nonce` set to it, and the requester ignores any answer that names
 * another nonce.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace rdma_samples {

/** @brief How to reach a queue pair. */
struct ConnectionDescriptor {
    std::uint64_t nonce = 0;                 ///< random, fresh for every run
    std::optional<std::uint64_t> peer_nonce; ///< in a reply: the nonce of the descriptor it answers
    std::uint32_t qp_num = 0;                ///< queue pair number (24 bits)
    std::uint32_t psn = 0;                   ///< first packet sequence number this side sends (24 bits)
    std::uint16_t lid = 0;                   ///< InfiniBand local identifier (0 on RoCE)
    ibv_gid gid{};                           ///< the GID this side is addressed by
    int mtu = 1024;                          ///< path MTU in bytes: 256, 512, 1024, 2048 or 4096
};

/**
 * @brief How to reach an unreliable datagram (UD) queue pair (rdma_ud): `kind=ud`.
 *
 * A UD QP has no connection, so no PSN and no path to agree on: a sender needs the receiver's QPN and
 * the Q_Key its datagrams must carry, plus the GID (and LID) to build an address handle from. The MTU
 * is the receiver's port MTU: the largest message one datagram can carry.
 */
struct UdDescriptor {
    std::uint64_t nonce = 0;                 ///< random, fresh for every run
    std::optional<std::uint64_t> peer_nonce; ///< in a reply: the nonce of the descriptor it answers
    std::uint32_t qp_num = 0;                ///< queue pair number (24 bits)
    std::uint32_t qkey = 0;                  ///< the Q_Key a datagram must carry to be accepted (32 bits)
    std::uint16_t lid = 0;                   ///< InfiniBand local identifier (0 on RoCE)
    ibv_gid gid{};                           ///< the GID this side is addressed by
    int mtu = 1024;                          ///< port MTU in bytes: 256, 512, 1024, 2048 or 4096
};

/** @brief What a resource descriptor describes. */
enum class ResourceKind { mmap, sync_event };

/** @brief Where the exported memory is and what the peer may do there. */
struct ResourceDescriptor {
    ResourceKind kind = ResourceKind::mmap;  ///< an mmap (buffer) or a sync event (8-byte counter)
    std::uint64_t nonce = 0;                 ///< the exporter's nonce
    std::optional<std::uint64_t> peer_nonce; ///< the requester nonce this export answers
    std::uint64_t addr = 0;                  ///< virtual address of the first exported byte
    std::uint32_t length = 0;                ///< exported bytes; the peer must stay inside
    std::uint32_t rkey = 0;                  ///< the remote key of the memory region
    int access = 0;                          ///< IBV_ACCESS_* flags the region grants
};

/**
 * @brief A descriptor that cannot be read or is malformed: an Error whose message names the file and
 * line, and whose hint says where a good descriptor comes from.
 */
class DescriptorError : public Error {
public:
    /** @param what the file, the line and what is wrong with it */
    explicit DescriptorError(const std::string &what)
        : Error(what, "the descriptor file is not one this program wrote: check the path (-re, -m), or copy it "
                      "again from the peer, unchanged")
    {}
};

/** @brief The most bytes a descriptor may have, in a file or in-band; a real one has a few hundred. */
inline constexpr std::size_t max_descriptor_size = 4096;

/**
 * @brief The text form of a connection descriptor.
 * @param d the descriptor
 * @return the file's contents, `key=value` lines
 */
std::string format_descriptor(const ConnectionDescriptor &d);
/**
 * @brief The text form of a resource descriptor.
 * @param d the descriptor
 * @return the file's contents, `key=value` lines
 */
std::string format_descriptor(const ResourceDescriptor &d);

/**
 * @brief Parse a connection descriptor.
 * @param text   the file's contents
 * @param source the file name, for messages
 * @return the descriptor
 * @throws DescriptorError "<source> line N: <key>: expected ..., got ..." for any malformed, missing,
 *         duplicate or unknown field, a wrong kind or version
 */
ConnectionDescriptor parse_connection_descriptor(const std::string &text, const std::string &source);

/**
 * @brief The text form of a UD descriptor.
 * @param d the descriptor
 * @return the file's contents, `key=value` lines
 */
std::string format_descriptor(const UdDescriptor &d);

/**
 * @brief Parse a UD descriptor (`kind=ud`).
 * @param text   the file's contents
 * @param source the file name, for messages
 * @return the descriptor
 * @throws DescriptorError as parse_connection_descriptor()
 */
UdDescriptor parse_ud_descriptor(const std::string &text, const std::string &source);

/**
 * @brief A kind as its descriptor names it: "mmap" or "sync_event".
 * @param k the kind
 * @return its name
 */
const char *resource_kind_name(ResourceKind k);

/**
 * @brief Parse a resource descriptor of kind @p kind.
 * @param text   the file's contents
 * @param source the file name, for messages
 * @param kind   the kind this program expects
 * @return the descriptor
 * @throws DescriptorError as parse_connection_descriptor()
 */
ResourceDescriptor parse_resource_descriptor(const std::string &text, const std::string &source, ResourceKind kind);

/** @brief A fresh random 64-bit nonce.
 *  @return the nonce */
std::uint64_t new_nonce();

} // namespace rdma_samples
