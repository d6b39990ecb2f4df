/**
 * @file options.hpp
 * @brief rdma_memory's flags: rdma_memory_register's and the sizes they choose (checked before any device is
 * opened), rdma_memory_fork's, and the window pair's.
 */
#pragma once

#include "mapping.hpp"
#include "table.hpp"

#include <rdma_samples/args.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdma_memory {

/** @brief rdma_memory_register's own flags; the common ones are in Args. */
struct Options {
    std::vector<std::size_t> sizes; ///< --sizes; empty: default_sizes (default_huge_sizes with --huge)
    int runs = 5;                   ///< --runs: registrations timed per size
    bool huge = false;              ///< --huge: 2 MiB pages (MAP_HUGETLB)
    bool rereg = false;             ///< --rereg: also time ibv_rereg_mr() to a new buffer
    bool odp = false;               ///< --odp: register on demand (IBV_ACCESS_ON_DEMAND), nothing pinned
    bool dmabuf = false;            ///< --dmabuf: register a dma-buf (/dev/udmabuf) instead of user memory

    /** @brief The page size the buffers get. @return 2 MiB with --huge, else the system's */
    std::size_t page() const { return huge ? huge_page_size : static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

    /** @brief The sizes to register, each checked: a bad one is a bad command line (exit 2).
     *  @return --sizes or the defaults @throws rdma_samples::UsageError */
    std::vector<std::size_t> checked_sizes() const
    {
        using rdma_samples::UsageError;
        const std::vector<std::size_t> list = !sizes.empty() ? sizes : huge ? default_huge_sizes : default_sizes;
        for (std::size_t size : list)
            if (size == 0)
                throw UsageError("--sizes: a size of 0 registers nothing", "e.g. 4K,64K,1M");
            else if (size % page() != 0)
                throw UsageError("--sizes: " + std::to_string(size) + " bytes is not a whole number of " +
                                     size_text(page()) + " pages",
                                 huge ? "with --huge every size is a multiple of 2M" : "e.g. 4K,64K,1M");
        if ((odp && dmabuf) || (dmabuf && (huge || rereg)))
            throw UsageError("--dmabuf registers a dma-buf: it takes neither --odp, --huge nor --rereg");
        return list;
    }

    /** @brief The flags that fill these fields, for ProgramSpec::extra. @return them */
    std::vector<rdma_samples::ExtraFlag> flags()
    {
        return {
            {"sizes", "LIST",
             "sizes to register, e.g. 4K,64K,1M (K, M, G: powers of 1024), each a whole number of pages",
             "4K,64K,1M,16M,64M,256M; with --huge 2M,8M,32M,64M",
             [this](const std::string &v) { sizes = parse_sizes(v); }},
            rdma_samples::int_flag("runs", "N", "registrations timed per size", "5", runs, 1, 1000),
            {"huge", "", "back the buffers with 2 MiB huge pages (MAP_HUGETLB; see /proc/sys/vm/nr_hugepages)", "off",
             [this](const std::string &) { huge = true; }},
            {"rereg", "", "also time ibv_rereg_mr() to a new buffer of the same size, against dereg + reg", "off",
             [this](const std::string &) { rereg = true; }},
            {"odp", "", "register on demand (IBV_ACCESS_ON_DEMAND), after asking the device for ODP", "off",
             [this](const std::string &) { odp = true; }},
            {"dmabuf", "", "register dma-bufs made with /dev/udmabuf (ibv_reg_dmabuf_mr)", "off",
             [this](const std::string &) { dmabuf = true; }},
        };
    }
};

/** @brief rdma_memory_fork's own flag. */
struct ForkOptions {
    bool fork_init = false; ///< --fork-init: call ibv_fork_init() before any other verbs call

    /** @brief The flags that fill these fields, for ProgramSpec::extra. @return them */
    std::vector<rdma_samples::ExtraFlag> flags()
    {
        return {{"fork-init", "", "call ibv_fork_init() first (MADV_DONTFORK on every registration)", "off",
                 [this](const std::string &) { fork_init = true; }}};
    }
};

/** @brief rdma_memory_window_requester's own flags. */
struct WindowRequesterOptions {
    bool past_window = false;  ///< --past-window: the WRITE ends one byte past the window
    bool after_revoke = false; ///< --after-revoke: WRITE again once the window is revoked
    bool invalidate = false;   ///< --invalidate: "done" is a SEND with invalidate of the window's rkey

    /** @brief The flags that fill these fields, for ProgramSpec::extra. @return them */
    std::vector<rdma_samples::ExtraFlag> flags()
    {
        return {
            {"past-window", "", "demonstration: the WRITE ends one byte past the window; refused", "",
             [this](const std::string &) { past_window = true; }},
            {"after-revoke", "", "demonstration: WRITE again after the revocation; refused", "",
             [this](const std::string &) { after_revoke = true; }},
            {"invalidate", "", "revoke the window ourselves: \"done\" is a SEND with invalidate", "",
             [this](const std::string &) { invalidate = true; }},
        };
    }
};

/** @brief Where the window starts in the region, unless --offset says otherwise. */
inline constexpr std::uint32_t default_offset = 1024;
/** @brief How long the window is, unless --length says otherwise. */
inline constexpr std::uint32_t default_length = 256;

/** @brief rdma_memory_window_responder's own flags: the window's type and the part of the region it covers. */
struct WindowResponderOptions {
    int type = 2;                          ///< --type: 1 or 2
    std::uint32_t offset = default_offset; ///< --offset: where the window starts in the region
    std::uint32_t length = default_length; ///< --length: how many bytes it covers

    /** @brief The flags that fill these fields, for ProgramSpec::extra. @return them */
    std::vector<rdma_samples::ExtraFlag> flags()
    {
        using rdma_samples::parse_number;
        return {
            rdma_samples::int_flag("type", "1|2", "the window's type: 1 (ibv_bind_mw) or 2 (a bind work request)", "2",
                                   type, 1, 2),
            {"offset", "BYTES",
             "where the window starts in the 4096-byte region; past the region is refused by the device "
             "(IBV_WC_MW_BIND_ERR)",
             std::to_string(default_offset),
             [this](const std::string &v) {
                 offset = static_cast<std::uint32_t>(parse_number("--offset", v, 0, 1u << 20));
             }},
            {"length", "BYTES", "how many bytes the window covers", std::to_string(default_length),
             [this](const std::string &v) {
                 length = static_cast<std::uint32_t>(parse_number("--length", v, 1, 1u << 20));
             }},
        };
    }
};

} // namespace rdma_memory
