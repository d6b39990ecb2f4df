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
 * Files are written atomically (a temporary file, then rename), so a reader never sees half a file.
 * The reader rejects anything malformed with the file name, the line and what was expected.
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
    std::uint64_t nonce = 0;                ///< random, fresh for every run
    std::optional<std::uint64_t> peer_nonce; ///< in a reply: the nonce of the descriptor it answers
    std::uint32_t qp_num = 0;               ///< queue pair number (24 bits)
    std::uint32_t psn = 0;                  ///< first packet sequence number this side sends (24 bits)
    std::uint16_t lid = 0;                  ///< InfiniBand local identifier (0 on RoCE)
    ibv_gid gid{};                          ///< the GID this side is addressed by
    int mtu = 1024;                         ///< path MTU in bytes: 256, 512, 1024, 2048 or 4096
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
    {
    }
};

/** @brief The most bytes a descriptor file may have; a real one has a few hundred. */
inline constexpr std::size_t max_descriptor_size = 4096;

/**
 * @brief Read a descriptor file, bounded in time and memory whatever sits at @p path.
 *
 * Returns at once: a FIFO, a socket, a device node or a directory (or a symlink to one) is an error
 * naming what it is, a file larger than max_descriptor_size is "too large"; nothing is read past
 * that cap.
 * @param path   the file
 * @param exists set to false when nothing is at @p path (yet)
 * @return the file's text (empty when it does not exist)
 * @throws DescriptorError for anything that is not a small regular file
 */
std::string read_descriptor_text(const std::string &path, bool &exists);

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

/**
 * @brief Write @p text to @p path atomically: a temporary file in the same folder, then rename().
 * @param path where the file goes (-ld, -m)
 * @param text its contents (format_descriptor())
 * @throws Error naming the path and errno, with a hint
 */
void write_descriptor_file(const std::string &path, const std::string &text);

/** @brief Where a descriptor is expected from, for the waiting message and the timeout error. */
struct WaitFor {
    std::string path;          ///< the file to wait for
    std::string from;          ///< who writes it, e.g. "the responder (rdma_write_responder)"
    int timeout_s = 30;        ///< give up after this many seconds (-t)
    std::optional<std::uint64_t> answering; ///< accept only a file whose peer_nonce is this
};

/**
 * @brief Wait (bounded) for a connection descriptor file, parse it, then remove it.
 *
 * Says once which file it waits for and who writes it. A file whose peer_nonce does not match is from
 * an earlier run: it is reported once and ignored. A file that stays malformed is an error.
 * @param w the file, who writes it, the bound and the nonce it must answer
 * @return the parsed descriptor
 * @throws Error on timeout (naming the file and the writer) or DescriptorError
 */
ConnectionDescriptor wait_for_connection_descriptor(const WaitFor &w);

/**
 * @brief As wait_for_connection_descriptor(), for a resource descriptor of kind @p kind.
 * @param w    the file, who writes it, the bound and the nonce it must answer
 * @param kind the kind this program expects
 * @return the parsed descriptor
 */
ResourceDescriptor wait_for_resource_descriptor(const WaitFor &w, ResourceKind kind);

/**
 * @brief The descriptor file of connection @p i when one process has many (rdma_multi_conn):
 * "<path>-0000", "<path>-0001", ...
 * @param path the path given with -ld or -re
 * @param i    the connection's index
 * @return the numbered path
 */
std::string numbered_path(const std::string &path, int i);

/** @brief A fresh random 64-bit nonce.
 *  @return the nonce */
std::uint64_t new_nonce();

} // namespace rdma_samples
