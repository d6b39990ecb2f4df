/**
 * @file datagrams.hpp
 * @brief What the two UD lessons (rdma_ud, rdma_multicast) share: step 1's device line with its MTU,
 * the 40 bytes before every UD payload and the payload read from a receive; numbered datagrams,
 * "#seq/count text", and a receiver's tally of which numbers came and which never did: UD resends
 * nothing, and numbering is how a receiver notices a loss.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace rdma_samples {

/** @brief The most datagrams one run sends or expects (--iters). */
inline constexpr int max_datagrams = 64;

/** @brief The bytes the device writes before the payload of every UD receive: the GRH, or on RoCE v2
 *  over IPv4 20 undefined bytes and the IP header (chapter 12). */
inline constexpr std::size_t grh_bytes = 40;

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
 * @brief The payload of a UD receive: the bytes after the 40, as many as the completion counts. A
 * completion that does not fit UD's layout (fewer than the 40, or more than the slot) is refused.
 * @param slot_start where the receive's buffer begins @param slot its size @param wc its completion
 * @return the payload
 * @throws Error naming the sizes
 */
inline std::string ud_payload(const char *slot_start, std::size_t slot, const ibv_wc &wc)
{
    if (wc.byte_len < grh_bytes || wc.byte_len > slot)
        throw Error("a receive of " + std::to_string(wc.byte_len) + " bytes in a slot of " + std::to_string(slot),
                    "the device broke UD's layout (40 header bytes, then at most the MTU); check dmesg");
    return std::string(slot_start + grh_bytes, wc.byte_len - grh_bytes); // byte_len counts the 40
}

/** @brief A numbered datagram's payload, "#seq/count text": the receiver can tell which never came. */
struct Numbered {
    int seq = 0;      ///< 1 .. count
    int count = 0;    ///< how many the sender sends
    std::string text; ///< -s
};

/**
 * @brief Write datagram @p seq of @p count into @p out (at most @p room bytes).
 * @param out where it goes @param room the bytes there @param seq its number (1 .. count)
 * @param count how many are sent @param text the sender's -s
 * @return its length, without a terminating NUL (none is sent); at least @p room when it did not fit
 */
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

    /** @brief Count @p d. @param d a numbered datagram (parse_datagram()'s)
     *  @return what its line adds: " (duplicate)", " (out of order)" or "" */
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

} // namespace rdma_samples
