/**
 * @file datagrams.hpp
 * @brief Numbered datagrams, "#seq/count text", and a receiver's tally of which numbers came and which
 * never did: UD resends nothing, and numbering is how a receiver notices a loss (rdma_ud,
 * rdma_multicast).
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace rdma_samples {

/** @brief The most datagrams one run sends or expects (--iters, --count). */
inline constexpr int max_datagrams = 64;

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
