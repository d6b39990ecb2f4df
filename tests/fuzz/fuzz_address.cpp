/**
 * @file fuzz_address.cpp
 * @brief libFuzzer target: the GID parser and the RDMA CM server address parser (-sa with -sat).
 *
 * The first byte chooses -sat (ipv4, ipv6, gid); the rest is the -sa text. parse_server_addr() either
 * returns an address of the family it promises or throws Error with one short printable line;
 * gid_from_string() either fails or gives a GID that prints back to text and parses to the same bytes.
 * Neither ever looks a name up (AI_NUMERICHOST): no input reaches the network.
 */
#include "fuzz_common.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/device.hpp>

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

using namespace rdma_samples;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    if (size == 0)
        return 0;
    const AddrType types[] = {AddrType::ipv4, AddrType::ipv6, AddrType::gid};
    const AddrType type = types[data[0] % 3];
    const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);

    ibv_gid gid{};
    if (gid_from_string(text, gid)) {
        fuzz::require(text.find('\0') == std::string::npos, "a GID with a NUL byte in it is refused");
        ibv_gid again{};
        fuzz::require(gid_from_string(gid_to_string(gid), again) && std::memcmp(gid.raw, again.raw, 16) == 0,
                      "GID round trip");
    }
    try {
        SockAddr a = parse_server_addr(text, type, 13579);
        const int family = a.get()->sa_family;
        fuzz::require(family == AF_INET || family == AF_INET6, "an IPv4 or IPv6 address");
        fuzz::require(type != AddrType::ipv4 || family == AF_INET, "-sat ipv4 gives IPv4");
        fuzz::require(text.find('\0') == std::string::npos, "an address with a NUL byte in it is refused");
    } catch (const Error &e) {
        fuzz::check_message(e.what(), "parse_server_addr");
        fuzz::check_message(e.hint(), "parse_server_addr hint");
    }
    return 0;
}
