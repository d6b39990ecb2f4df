/**
 * @file options.hpp
 * @brief rdma_srq_receive's command line: its own flags (the common ones are in Args), its ProgramSpec,
 * and the checks that they fit together with -nc and -cm: what main() fills in before the lesson runs.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/text.hpp>

#include <cstdint>
#include <string>

namespace rdma_srq {

/** @brief The receiver's own flags (the common ones, -nc and -cm among them, are in Args). */
struct ReceiverOptions {
    std::uint32_t size = 0;  ///< --srq-size: receives in the SRQ (0: one per connection)
    std::uint32_t limit = 0; ///< --srq-limit: the low-water mark (0: half the SRQ)
    int hold_ms = 0;         ///< --srq-hold-ms: demonstration, keep the SRQ empty this long
};

/** @brief rdma_srq_receive's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec receiver_spec(ReceiverOptions &opt)
{
    rdma_samples::ProgramSpec spec{
        .name = "rdma_srq_receive",
        .role = "receiver",
        .summary = "A shared receive queue: N RC QPs take their receives from one pool; print each message.",
        .resource_descriptor = false,
        .multi_conn = true,
        .rdma_cm = true};
    spec.extra.push_back({"srq-size", "N", "receives in the SRQ, refilled as messages arrive (perftest: --rx-depth)",
                          "one per connection", [&opt](const std::string &v) {
                              opt.size =
                                  static_cast<std::uint32_t>(rdma_samples::parse_number("--srq-size", v, 1, 1u << 24));
                          }});
    spec.extra.push_back({"srq-limit", "N", "arm IBV_EVENT_SRQ_LIMIT_REACHED for when fewer than N receives are left",
                          "half the SRQ", [&opt](const std::string &v) {
                              opt.limit =
                                  static_cast<std::uint32_t>(rdma_samples::parse_number("--srq-limit", v, 1, 1u << 24));
                          }});
    spec.extra.push_back(rdma_samples::int_flag("srq-hold-ms", "MS",
                                                "demonstration: keep the SRQ empty this long after the senders "
                                                "connect, so their SENDs meet RNR NAKs (descriptor files only)",
                                                "", opt.hold_ms, 1, 60000));
    return spec;
}

/** @brief The flags must fit together and with -nc; a bad combination is a usage error (exit 2).
 *  @param args the common flags @param opt the receiver's @param size the SRQ's receives (--srq-size or -nc) */
inline void check_options(const rdma_samples::Args &args, const ReceiverOptions &opt, std::uint32_t size)
{
    const auto n = static_cast<std::uint32_t>(args.num_connections);
    if (args.use_cm && args.server_addr)
        throw rdma_samples::UsageError(
            "-sa: rdma_srq_receive is a server only (an SRQ pays off across many connections)",
            "drop -sa; for a receiving client see rdma_multi_conn_receive -cm -sa ADDR");
    if (size < n) // every sender SENDs at once: each needs a receive waiting, or it meets RNR NAKs
        throw rdma_samples::UsageError(
            "--srq-size " + std::to_string(size) + " is smaller than one message per connection (-nc " +
                std::to_string(n) + ")",
            "pass --srq-size " + std::to_string(n) + " or more; --srq-hold-ms shows what an empty SRQ does to senders");
    if (opt.limit > size)
        throw rdma_samples::UsageError("--srq-limit " + std::to_string(opt.limit) + " is larger than the SRQ (" +
                                           std::to_string(size) + " receives)",
                                       "pass --srq-limit " + std::to_string(size) + " or less");
    if (opt.hold_ms && args.use_cm)
        throw rdma_samples::UsageError("--srq-hold-ms works with descriptor files only", "drop -cm");
}

} // namespace rdma_srq
