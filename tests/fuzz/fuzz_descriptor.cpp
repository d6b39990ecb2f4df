/**
 * @file fuzz_descriptor.cpp
 * @brief libFuzzer target: the connection and resource descriptor parsers.
 *
 * The input is the text of a descriptor file (a few hundred bytes, any bytes at all). Each parser
 * either returns a descriptor or throws DescriptorError with one short printable line. A descriptor
 * that parses must survive a round trip: formatted again and parsed again, it is the same.
 */
#include "fuzz_common.hpp"

#include <rdma_samples/descriptor.hpp>

#include <cstdint>
#include <cstring>
#include <string>

using namespace rdma_samples;

namespace {

void connection(const std::string &text)
{
    ConnectionDescriptor d;
    try {
        d = parse_connection_descriptor(text, "/tmp/remote_connection_desc_path.txt");
    } catch (const DescriptorError &e) {
        fuzz::check_message(e.what(), "parse_connection_descriptor");
        return;
    }
    const ConnectionDescriptor again = parse_connection_descriptor(format_descriptor(d), "round trip");
    fuzz::require(again.nonce == d.nonce && again.peer_nonce == d.peer_nonce && again.qp_num == d.qp_num &&
                      again.psn == d.psn && again.lid == d.lid && again.mtu == d.mtu &&
                      std::memcmp(again.gid.raw, d.gid.raw, sizeof d.gid.raw) == 0,
                  "connection descriptor round trip");
    fuzz::require(d.qp_num <= 0xffffff && d.psn <= 0xffffff, "24-bit QPN and PSN");
}

void resource(const std::string &text, ResourceKind kind)
{
    ResourceDescriptor d;
    try {
        d = parse_resource_descriptor(text, "/tmp/remote_resource_desc_path.txt", kind);
    } catch (const DescriptorError &e) {
        fuzz::check_message(e.what(), "parse_resource_descriptor");
        return;
    }
    fuzz::require(d.length >= 1 && d.addr <= UINT64_MAX - d.length, "a non-empty range that does not wrap");
    const ResourceDescriptor again = parse_resource_descriptor(format_descriptor(d), "round trip", kind);
    fuzz::require(again.nonce == d.nonce && again.peer_nonce == d.peer_nonce && again.addr == d.addr &&
                      again.length == d.length && again.rkey == d.rkey && again.access == d.access,
                  "resource descriptor round trip");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    connection(text);
    resource(text, ResourceKind::mmap);
    resource(text, ResourceKind::sync_event);
    return 0;
}
