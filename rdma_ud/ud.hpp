/**
 * @file ud.hpp
 * @brief What rdma_ud's sender and receiver share: the UD descriptor each side publishes, the refusal
 * of a WRITE or READ, and the 40 header bytes the receiver shows (the flags are in support/options.hpp;
 * step 1's device line, the payload of a receive, the numbered datagram "#i/N text" and the receiver's
 * tally in common's datagrams.hpp, which rdma_multicast shares). The verbs calls of the lesson stay in
 * the two programs.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/datagrams.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace rdma_ud {

using namespace rdma_samples;

/**
 * @brief Write this side's `kind=ud` descriptor to @p path (-ld): how to address our QP (QPN, Q_Key, LID,
 * GID) and the largest datagram we take (MTU). No PSN: nobody checks PSNs on UD.
 * @return the descriptor written (its nonce names the answer the sender waits for)
 */
inline UdDescriptor publish_descriptor(const std::string &path, const Device &dev, const ibv_qp *qp, std::uint32_t qkey,
                                       int mtu, std::optional<std::uint64_t> peer_nonce)
{
    const UdDescriptor ours{.nonce = new_nonce(),
                            .peer_nonce = peer_nonce,
                            .qp_num = qp->qp_num,
                            .qkey = qkey,
                            .lid = dev.port_attr.lid,
                            .gid = dev.gid,
                            .mtu = mtu};
    write_descriptor_file(path, format_descriptor(ours));
    return ours;
}

/** @brief The hint of every failure of `rdma_ud_send --op`, whatever the device answers. */
inline const std::string sends_only =
    "UD carries SENDs only (IBTA); READ, WRITE and atomics need a connected QP: RC (rdma_write, rdma_read)";

/**
 * @brief `rdma_ud_send --op`: the device took the RDMA WRITE or READ posted on the UD QP (wr_id 1); wait
 * for its completion, which must fail. A UD work request has no room for a remote address or rkey
 * (wr.wr is a union: on UD it holds the address handle), and the IBTA allows only SEND on UD; Soft-RoCE
 * completes it with IBV_WC_LOC_QP_OP_ERR and moves the QP to the error state. No packet leaves.
 * @param completions the sender's CQ
 * @param op          "RDMA WRITE" or "RDMA READ"
 * @param timeout_s   -t
 * @throws Error always: the status it failed with, or that it did not; the hint is sends_only
 */
[[noreturn]] inline void expect_refusal(Completions &completions, const std::string &op, int timeout_s)
{
    info("ibv_post_send accepted it; the device judges it when it executes it");
    try {
        completions.wait(1, IBV_WC_SEND, timeout_s, "the " + op);
    } catch (const Error &e) { // the status it failed with; the reason is UD's, whatever the status
        throw Error(e.what(), sends_only);
    }
    throw Error("the " + op + " on a UD QP completed successfully",
                "this device does not follow the IBTA: " + sends_only);
}

/**
 * @brief Is this an IPv4 header as RoCE v2 sends it: version 4, five 32-bit words (no options), and a
 * checksum that adds up (the ones' complement sum of its ten 16-bit words is 0xffff)?
 * @param h the 20 bytes at byte 20 of a UD receive @return true for IPv4
 */
inline bool roce_ipv4_header(const std::uint8_t *h)
{
    if (h[0] != 0x45)
        return false;
    std::uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += static_cast<std::uint32_t>(h[i] << 8 | h[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

/**
 * @brief The 40 bytes as they lie in the buffer, in two rows of 20, so the reader can see which header
 * the device wrote: on RoCE v2 over IPv4, Soft-RoCE writes 20 zero bytes, then the IPv4 header exactly
 * as it arrived (45 = version 4, 5 words; TTL, protocol 17 = UDP, checksum, both addresses).
 * @param header the start of the receive slot
 */
inline void show_header(const char *header)
{
    const auto *b = reinterpret_cast<const std::uint8_t *>(header);
    for (std::size_t row = 0; row < grh_bytes; row += 20) {
        std::string bytes;
        for (std::size_t i = row; i < row + 20; ++i) {
            char two[4];
            std::snprintf(two, sizeof two, " %02x", b[i]);
            bytes += two;
        }
        info("  bytes %2zu-%2zu:%s", row, row + 19, bytes.c_str());
    }
}

} // namespace rdma_ud
