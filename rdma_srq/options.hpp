/**
 * @file options.hpp
 * @brief rdma_srq_receive's own flags, besides the common ones, and the checks that they fit together
 * with -nc and -cm: what main() fills in before the lesson runs.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>

#include <cstdint>
#include <string>

namespace rdma_samples {

/** The receiver's own flags. */
struct SrqOptions {
    std::uint32_t size = 0;  ///< --srq-size: receives in the SRQ (0: one per connection)
    std::uint32_t limit = 0; ///< --srq-limit: the low-water mark (0: half the SRQ)
    int hold_ms = 0;         ///< --srq-hold-ms: demonstration, keep the SRQ empty this long
};

/** Add --srq-size, --srq-limit and --srq-hold-ms to @p spec; they fill @p opt. */
inline void add_srq_options(ProgramSpec &spec, SrqOptions &opt)
{
    spec.extra.push_back({"srq-size", "N", "receives in the SRQ, refilled as messages arrive (perftest: --rx-depth)",
                          "one per connection", [&opt](const std::string &v) {
                              opt.size = static_cast<std::uint32_t>(parse_number("--srq-size", v, 1, 1u << 24));
                          }});
    spec.extra.push_back({"srq-limit", "N", "arm IBV_EVENT_SRQ_LIMIT_REACHED for when fewer than N receives are left",
                          "half the SRQ", [&opt](const std::string &v) {
                              opt.limit = static_cast<std::uint32_t>(parse_number("--srq-limit", v, 1, 1u << 24));
                          }});
    spec.extra.push_back(int_flag("srq-hold-ms", "MS",
                                  "demonstration: keep the SRQ empty this long after the senders "
                                  "connect, so their SENDs meet RNR NAKs (descriptor files only)",
                                  "", opt.hold_ms, 1, 60000));
}

/** The flags must fit together, -nc and the device; a bad combination is a usage error (exit 2). */
inline void check_options(const Args &args, const SrqOptions &opt, std::uint32_t size)
{
    const auto n = static_cast<std::uint32_t>(args.num_connections);
    if (args.use_cm && args.server_addr)
        throw UsageError("-sa: rdma_srq_receive is a server only (an SRQ pays off across many connections)",
                         "drop -sa; for a receiving client see rdma_multi_conn_receive -cm -sa ADDR");
    if (size < n) // every sender SENDs at once: each needs a receive waiting, or it meets RNR NAKs
        throw UsageError("--srq-size " + std::to_string(size) + " is smaller than one message per connection (-nc " +
                             std::to_string(n) + ")",
                         "pass --srq-size " + std::to_string(n) +
                             " or more; --srq-hold-ms shows what an empty SRQ does to senders");
    if (opt.limit > size)
        throw UsageError("--srq-limit " + std::to_string(opt.limit) + " is larger than the SRQ (" +
                             std::to_string(size) + " receives)",
                         "pass --srq-limit " + std::to_string(size) + " or less");
    if (opt.hold_ms && args.use_cm)
        throw UsageError("--srq-hold-ms works with descriptor files only", "drop -cm");
}

} // namespace rdma_samples
