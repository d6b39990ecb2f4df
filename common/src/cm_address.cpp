/** @file cm_address.cpp @brief `-sa` read as `-sat` says; socket addresses as text. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/text.hpp>

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

namespace rdma_samples {

SockAddr parse_server_addr(const std::string &text, AddrType type, std::uint16_t port)
{
    SockAddr a;
    auto *in4 = reinterpret_cast<sockaddr_in *>(&a.storage);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&a.storage);
    const bool nul = text.find('\0') != std::string::npos; // the C parsers below would stop at it
    if (type == AddrType::ipv4) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        if (nul || inet_pton(AF_INET, text.c_str(), &in4->sin_addr) != 1)
            throw Error("-sa " + quote(text) + " is not an IPv4 address",
                        "give a dotted quad such as 10.77.0.1, or say "
                        "what it is with -sat ipv6 or -sat gid");
        return a;
    }
    if (type == AddrType::ipv6) {
        addrinfo hints{};
        hints.ai_family = AF_INET6;
        hints.ai_flags = AI_NUMERICHOST; // an address, never a name lookup
        addrinfo *res = nullptr;
        if (nul || getaddrinfo(text.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
            throw Error("-sa " + quote(text) + " is not an IPv6 address",
                        "give an address such as fd00::1 (link-local ones need the interface: fe80::1%eth0)");
        std::memcpy(in6, res->ai_addr, sizeof *in6);
        freeaddrinfo(res);
        in6->sin6_port = htons(port);
        return a;
    }
    // A GID. On RoCE (v1 and v2) every GID is built from an IP address of the interface: the
    // IPv4-mapped ::ffff:a.b.c.d stands for a.b.c.d, any other for the IPv6 address it spells.
    ibv_gid gid{};
    if (!gid_from_string(text, gid))
        throw Error("-sa " + quote(text) + " is not a GID",
                    "give a GID as ibv_devinfo -v prints it, e.g. ::ffff:10.77.0.1");
    static const std::uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(gid.raw, v4_prefix, sizeof v4_prefix) == 0) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        std::memcpy(&in4->sin_addr, gid.raw + 12, 4);
        return a;
    }
    if (gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80)
        throw Error("-sa " + quote(text) + " is a link-local GID (fe80::/10): it names an address on one link only",
                    "RDMA CM needs to know which link: use -sat ipv6 -sa " + text +
                        "%IFACE, or the peer's "
                        "IPv4-mapped GID (::ffff:a.b.c.d) with -sat gid. AF_IB (InfiniBand GID addressing) is not "
                        "supported by RoCE devices");
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, gid.raw, 16);
    return a;
}

std::string addr_to_string(const sockaddr *sa)
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const auto *in4 = reinterpret_cast<const sockaddr_in *>(sa);
        inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
        return std::string(text) + " port " + std::to_string(ntohs(in4->sin_port));
    }
    if (sa->sa_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
        // An IPv4 client reaching a dual-stack listener shows up as ::ffff:a.b.c.d; print a.b.c.d.
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, text, sizeof text);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        return std::string(text) + " port " + std::to_string(ntohs(in6->sin6_port));
    }
    return "(address family " + std::to_string(sa->sa_family) + ")";
}

} // namespace rdma_samples
