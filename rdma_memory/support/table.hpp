/**
 * @file table.hpp
 * @brief rdma_memory_register's sizes and its table: parsing --sizes, naming a size, timing, and one row
 * of medians. Nothing here is RDMA; register.cpp does the registering.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rdma_memory {

inline constexpr std::size_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
/** @brief Up to 256 MiB: what the project's 1 GiB VM holds comfortably (twice that with --rereg). */
inline const std::vector<std::size_t> default_sizes = {4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB};
/** @brief The defaults with --huge: whole 2 MiB pages. */
inline const std::vector<std::size_t> default_huge_sizes = {2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB};

/** @brief "4K,64K,1M" -> bytes. A number with an optional K, M or G (powers of 1024).
 *  @param list --sizes' value @return the sizes @throws rdma_samples::UsageError for a bad list */
inline std::vector<std::size_t> parse_sizes(const std::string &list)
{
    std::vector<std::size_t> sizes;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        std::size_t unit = 1;
        // (not strchr, which also finds the terminating NUL: "4\0" would read as 4G)
        if (!item.empty() && std::string_view("KMGkmg").find(item.back()) != std::string_view::npos) {
            const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(item.back())));
            unit = u == 'K' ? KiB : u == 'M' ? MiB : GiB;
            item.pop_back();
        }
        const std::optional<std::uint64_t> n =
            rdma_samples::parse_unsigned(item, rdma_samples::NumberBase::decimal, 64 * GiB / unit);
        if (!n)
            throw rdma_samples::UsageError("--sizes: expected sizes such as 4K,64K,1M (at most 64G each), got " +
                                           rdma_samples::quote(list));
        sizes.push_back(*n * unit);
    }
    if (sizes.empty() || sizes.size() > 32)
        throw rdma_samples::UsageError("--sizes: expected 1 to 32 sizes, got " + rdma_samples::quote(list));
    return sizes;
}

/** @brief 4096 -> "4 KiB", 2097152 -> "2 MiB", 5000 -> "5000 B". @param bytes a size @return its name */
inline std::string size_text(std::size_t bytes)
{
    for (auto [unit, name] : {std::pair{GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}})
        if (bytes >= unit && bytes % unit == 0)
            return std::to_string(bytes / unit) + " " + name;
    return std::to_string(bytes) + " B";
}

/** @brief A stopwatch in microseconds. */
class Stopwatch {
public:
    /** @brief Start (again) from now. */
    void start() { t0_ = Clock::now(); }
    /** @brief Microseconds since start(). @return them */
    double us() const { return std::chrono::duration<double, std::micro>(Clock::now() - t0_).count(); }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point t0_ = Clock::now();
};

/** @brief Median, minimum and maximum of a row's timings, in microseconds. */
struct Stats {
    double median, min, max;
};
/** @brief The stats of @p us. @param us the timings (at least one) @return their stats */
inline Stats stats(std::vector<double> us)
{
    std::sort(us.begin(), us.end());
    const std::size_t n = us.size();
    const double median = n % 2 == 1 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
    return {median, us.front(), us.back()};
}

/** @brief The timings of one size, run by run. */
struct Timings {
    std::vector<double> reg, dereg, rereg, dereg_reg;
};

/** @brief The table's header line. @param rereg with --rereg's two columns */
inline void print_header(bool rereg)
{
    std::string header = "      size    pages reg_median    reg_min    reg_max dereg_median   per_page";
    if (rereg)
        header += " rereg_median dereg+reg_median";
    rdma_samples::result("%s", header.c_str());
}

/** @brief One row: @p size, its pages, the registration's stats, the median deregistration, the median per
 *  page, and with --rereg the two ways of moving a registration.
 *  @param size bytes @param page the page size @param t the runs' timings @param rereg with --rereg */
inline void print_row(std::size_t size, std::size_t page, const Timings &t, bool rereg)
{
    const Stats r = stats(t.reg), d = stats(t.dereg);
    const std::size_t pages = size / page;
    char cells[160];
    std::snprintf(cells, sizeof cells, "%10s %8zu %10.1f %10.1f %10.1f %12.1f %10.3f", size_text(size).c_str(), pages,
                  r.median, r.min, r.max, d.median, r.median / static_cast<double>(pages));
    std::string line = cells;
    if (rereg) {
        std::snprintf(cells, sizeof cells, " %12.1f %12.1f", stats(t.rereg).median, stats(t.dereg_reg).median);
        line += cells;
    }
    rdma_samples::result("%s", line.c_str());
}

} // namespace rdma_memory
