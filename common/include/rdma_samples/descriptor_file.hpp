/**
 * @file descriptor_file.hpp
 * @brief Descriptor files: a bounded read whatever sits at the path, an atomic write, and the bounded
 * wait for the peer's file that tells a live peer from a file left by an earlier run.
 *
 * Files are written atomically (a temporary file, then rename), so a reader never sees half a file.
 * Nonces tell a live peer from a stale file: the requester publishes a fresh nonce; the responder
 * answers with `peer_nonce` set to it, and the requester ignores any answer that names another nonce.
 * The format itself is descriptor.hpp.
 */
#pragma once

#include <rdma_samples/descriptor.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace rdma_samples {

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
 * @brief Write @p text to @p path atomically: a temporary file in the same folder, then rename().
 * @param path where the file goes (-ld, -m)
 * @param text its contents (format_descriptor())
 * @throws Error naming the path and errno, with a hint
 */
void write_descriptor_file(const std::string &path, const std::string &text);

/** @brief Where a descriptor is expected from, for the waiting message and the timeout error. */
struct WaitFor {
    std::string path;                       ///< the file to wait for
    std::string from;                       ///< who writes it, e.g. "the responder (rdma_write_responder)"
    int timeout_s = 30;                     ///< give up after this many seconds (-t)
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
 * @brief As wait_for_connection_descriptor(), for a UD descriptor (rdma_ud).
 * @param w the file, who writes it, the bound and the nonce it must answer
 * @return the parsed descriptor
 */
UdDescriptor wait_for_ud_descriptor(const WaitFor &w);

/**
 * @brief The descriptor file of connection @p i when one process has many (rdma_multi_conn):
 * "<path>-0000", "<path>-0001", ...
 * @param path the path given with -ld or -re
 * @param i    the connection's index
 * @return the numbered path
 */
std::string numbered_path(const std::string &path, int i);

} // namespace rdma_samples
