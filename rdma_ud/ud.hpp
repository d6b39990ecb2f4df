/**
 * @file ud.hpp
 * @brief What rdma_ud's sender and receiver share: step 1's device line, the UD descriptor each side
 * publishes, the numbered datagram ("#i/N text") and its --iters; and the receiver's bookkeeping: which
 * numbers came, and the 40 header bytes shown. The verbs calls of the lesson stay in the two programs.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rdma_ud {

using namespace rdma_samples;

/** @brief The bytes the device writes before the payload of every UD receive (chapter 12). */
inline constexpr std::size_t grh_bytes = 40;

/** @brief The most datagrams one run sends or expects (--iters). */
inline constexpr int max_datagrams = 64;

/** @brief Step 1's line on both sides: the device, and its port MTU, the most one datagram carries.
 *  @param dev the device opened @return the port MTU in bytes */
inline int show_device(const Device &dev)
{
    const int mtu = mtu_bytes(dev.port_attr.active_mtu);
    info("device %s, port %u, GID index %d (%s), port MTU %d bytes", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str(), mtu);
    return mtu;
}

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

/** @brief --iters, the same on both sides. @param iters where it goes @param help its line in --help
 *  @return the flag */
inline ExtraFlag iters_flag(int &iters, const std::string &help)
{
    return int_flag("iters", "N", help, "3", iters, 1, max_datagrams);
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
 * @brief --qkey, on both sides: a Q_Key below 0x80000000 (one with the high bit set is a controlled
 * Q_Key, which only privileged QPs may send).
 * @param help its line in --help @param default_text its default @param set takes the value
 * @return the flag
 */
inline ExtraFlag qkey_flag(const std::string &help, const std::string &default_text,
                           std::function<void(std::uint32_t)> set)
{
    return {"qkey", "QKEY", help, default_text, [set = std::move(set)](const std::string &v) {
                set(static_cast<std::uint32_t>(parse_number("--qkey", v, 0, 0x7fffffff)));
            }};
}

/** @brief A numbered datagram's payload, "#seq/count text": the receiver can tell which never came. */
struct Numbered {
    int seq = 0;      ///< 1 .. count
    int count = 0;    ///< how many the sender sends
    std::string text; ///< -s
};

/** @brief Write datagram @p seq of @p count into @p out (at most @p room bytes).
 *  @return its length, without a terminating NUL (none is sent) */
inline std::size_t format_datagram(char *out, std::size_t room, int seq, int count, const std::string &text)
{
    return static_cast<std::size_t>(std::snprintf(out, room, "#%d/%d %s", seq, count, text.c_str()));
}

/** @brief Read a payload as format_datagram() wrote it. @param payload the bytes after the 40
 *  @return the datagram, or nothing when it is not a numbered one (count at most max_datagrams) */
inline std::optional<Numbered> parse_datagram(const std::string &payload)
{
    Numbered d;
    int text_at = 0;
    if (std::sscanf(payload.c_str(), "#%d/%d %n", &d.seq, &d.count, &text_at) != 2 || d.seq < 1 || d.seq > d.count ||
        d.count > max_datagrams)
        return std::nullopt;
    d.text = payload.c_str() + text_at;
    return d;
}

/** @brief The receiver's count: which numbers came, and which never did. */
struct Tally {
    std::vector<bool> seen = std::vector<bool>(max_datagrams + 1); ///< by number
    int received = 0;                                              ///< numbered datagrams taken
    int total = 0;                                                 ///< how many the sender says it sends
    int highest = 0;                                               ///< the highest number seen

    /** @brief Count @p d. @return what its line adds: " (duplicate)", " (out of order)" or "" */
    const char *note(const Numbered &d)
    {
        const auto at = static_cast<std::size_t>(d.seq);
        const char *remark = seen[at] ? " (duplicate)" : d.seq < highest ? " (out of order)" : "";
        seen[at] = true;
        highest = std::max(highest, d.seq);
        total = d.count;
        ++received;
        return remark;
    }
    /** @brief All came (or as many as that, counting duplicates). @return true when nothing is left to wait for */
    bool all_came() const { return total > 0 && received >= total; }
    /** @brief The numbers that never came. @return e.g. " #2 #3", empty when none */
    std::string lost() const
    {
        std::string numbers;
        for (int seq = 1; seq <= total; ++seq)
            if (!seen[static_cast<std::size_t>(seq)])
                numbers += " #" + std::to_string(seq);
        return numbers;
    }
};

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
