/**
 * @file cm_address.hpp
 * @brief The RDMA CM client's `-sa`: an IPv4 or IPv6 address, or a GID, as a socket address; and a
 * socket address as text for messages.
 */
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace rdma_samples {

/** @brief DOCA's default RDMA CM port. */
inline constexpr std::uint16_t default_cm_port = 13579;

/** @brief How `-sa` is to be read (`-sat`). */
enum class AddrType { ipv4, ipv6, gid };

/** @brief Where an RDMA CM client connects: the server's address, how to read it, and the port. */
struct CmServerAddr {
    std::string addr;                     ///< as typed, e.g. "10.77.0.1"
    AddrType type = AddrType::ipv4;       ///< how to read it
    std::uint16_t port = default_cm_port; ///< the server's port
};

/** @brief A socket address of either family, as the CM takes it. */
struct SockAddr {
    sockaddr_storage storage{}; ///< sockaddr_in or sockaddr_in6
    /** @brief As the sockaddr the librdmacm calls take.
     *  @return a pointer to the storage */
    sockaddr *get() { return reinterpret_cast<sockaddr *>(&storage); }
};

/**
 * @brief Read `-sa` as `-sat` says, with the port `-lp`.
 *
 * ipv4: dotted quad; ipv6: IPv6 text, with `%iface` for a link-local address; gid: a GID as
 * ibv_devinfo -v prints it. On RoCE a GID is built from an IP address: ::ffff:a.b.c.d is mapped to the IPv4
 * address a.b.c.d, any other GID is used as the IPv6 address it is. (AF_IB, addressing by GID on
 * InfiniBand, is not offered: Soft-RoCE and RoCE NICs do not support it.)
 * @param text the address as typed after -sa
 * @param type how to read it (-sat)
 * @param port the RDMA CM port (-lp)
 * @return the socket address
 * @throws Error naming the text and what was expected
 */
SockAddr parse_server_addr(const std::string &text, AddrType type, std::uint16_t port);

/**
 * @brief A socket address as text: "10.77.0.1 port 13579", "[fe80::1] port 13579".
 * @param sa an IPv4 or IPv6 socket address
 * @return the text
 */
std::string addr_to_string(const sockaddr *sa);

} // namespace rdma_samples
