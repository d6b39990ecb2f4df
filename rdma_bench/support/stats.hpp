/**
 * @file stats.hpp
 * @brief The measuring tape: wall clock, CPU time (user and system apart), percentiles, the result tables.
 *
 * The tables print the way perftest's do (one row per size) so `./lab bench` can read both. MB/s is
 * perftest's: 2^20 bytes per second.
 */
#pragma once

#include "options.hpp"

#include <rdma_samples/log.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace rdma_bench {

/** @brief Nanoseconds on the monotonic clock. @return now */
inline std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/** @brief CPU time, in microseconds: in our own code and libraries (user), and in the kernel on our
 *  behalf (system: the verbs calls that enter it, and on Soft-RoCE the packet work rxe does in them). */
struct CpuTime {
    double user = 0; ///< user-space microseconds
    double sys = 0;  ///< kernel microseconds
    /** @brief The time between two readings. @param earlier the first @return this - earlier */
    CpuTime operator-(const CpuTime &earlier) const { return {user - earlier.user, sys - earlier.sys}; }
};

/** @brief CPU time this process has used so far (getrusage). @return user and system time apart */
inline CpuTime cpu_us()
{
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto us = [](const timeval &t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
    return {us(ru.ru_utime), us(ru.ru_stime)};
}

/** @brief Wall and CPU time since it was started (or restarted): what one table row reports. */
struct Stopwatch {
    std::int64_t start_ns = now_ns(); ///< the wall clock at the start
    CpuTime start_cpu = cpu_us();     ///< the CPU time at the start
    /** @brief Start again, now. */
    void restart() { *this = Stopwatch{}; }
    /** @brief Wall time since the start. @return nanoseconds */
    std::int64_t elapsed_ns() const { return now_ns() - start_ns; }
    /** @brief CPU time since the start. @return user and system time apart */
    CpuTime cpu() const { return cpu_us() - start_cpu; }
};

/** @brief Header of the bandwidth table. @param csv comma-separated (--output csv) instead of aligned */
inline void print_bw_header(bool csv)
{
    rdma_samples::result(csv ? "%s,%s,%s,%s,%s,%s,%s" : "%10s %11s %11s %11s %11s %11s %11s", "bytes", "iterations",
                         "MB/s", "Gb/s", "Mmsg/s", "user_us/op", "sys_us/op");
}

/**
 * @brief One row of the bandwidth table.
 * @param size,iters message size and timed operations
 * @param ns     wall time of the timed operations
 * @param cpu    CPU time they took
 * @param csv    comma-separated (--output csv) instead of aligned
 */
inline void print_bw_row(std::uint32_t size, std::uint64_t iters, std::int64_t ns, CpuTime cpu, bool csv)
{
    const double seconds = static_cast<double>(ns) / 1e9;
    const double operations = static_cast<double>(iters);
    const double bytes = static_cast<double>(size) * operations;
    // MB/s is perftest's MiB/s (2^20 bytes); Gb/s is perftest's --report_gbits (10^9 bits).
    rdma_samples::result(csv ? "%u,%llu,%.2f,%.4f,%.6f,%.3f,%.3f" : "%10u %11llu %11.2f %11.4f %11.6f %11.3f %11.3f",
                         size, static_cast<unsigned long long>(iters), bytes / seconds / (1024.0 * 1024.0),
                         bytes * 8 / seconds / 1e9, operations / seconds / 1e6, cpu.user / operations,
                         cpu.sys / operations);
}

/** @brief Header of the latency table. @param csv comma-separated (--output csv) instead of aligned */
inline void print_lat_header(bool csv)
{
    rdma_samples::result(csv ? "%s,%s,%s,%s,%s,%s,%s,%s,%s" : "%10s %11s %9s %9s %9s %9s %9s %11s %11s", "bytes",
                         "iterations", "min_us", "median_us", "p99_us", "p99.9_us", "max_us", "user_us/op",
                         "sys_us/op");
}

/**
 * @brief One row of the latency table: nearest-rank percentiles of @p ns (sorted here).
 * @param size  message size
 * @param ns    one latency per timed operation, in nanoseconds
 * @param cpu   CPU time the timed operations took
 * @param csv   comma-separated (--output csv) instead of aligned
 */
inline void print_lat_row(std::uint32_t size, std::vector<double> &ns, CpuTime cpu, bool csv)
{
    std::sort(ns.begin(), ns.end());
    auto pct = [&](double q) {
        std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(ns.size()) + 0.999999);
        return ns[std::min(ns.size() - 1, rank == 0 ? 0 : rank - 1)] / 1000.0;
    };
    const auto operations = static_cast<double>(ns.size());
    rdma_samples::result(csv ? "%u,%zu,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.3f"
                             : "%10u %11zu %9.2f %9.2f %9.2f %9.2f %9.2f %11.3f %11.3f",
                         size, ns.size(), ns.front() / 1000.0, pct(0.5), pct(0.99), pct(0.999), ns.back() / 1000.0,
                         cpu.user / operations, cpu.sys / operations);
}

/** @brief Header of the table --mode asks for. @param opt the knobs (--mode, --output) */
inline void print_header(const Options &opt)
{
    if (opt.mode == Mode::bw)
        print_bw_header(opt.csv);
    else
        print_lat_header(opt.csv);
}

/** @brief The byte a verified buffer holds at offset @p i. @param i offset @return the byte */
inline char pattern(std::size_t i)
{
    return static_cast<char>((i * 7 + 3) & 0xff);
}

/** @brief Fill a buffer with pattern(), starting again every @p period bytes (a slice per QP).
 *  @param data,length the buffer @param period the bytes of one slice */
inline void fill_pattern(char *data, std::size_t length, std::size_t period)
{
    for (std::size_t i = 0; i < length; ++i)
        data[i] = pattern(i % period);
}

} // namespace rdma_bench
