/**
 * @file options.hpp
 * @brief rdma_ud's command lines: each program's own flags (the common ones are in Args), `--iters` and
 * `--qkey` the same on both sides, and each ProgramSpec.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/datagrams.hpp>

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace rdma_ud {

/** @brief rdma_ud_send's flags (besides -d, -g, -ld, -re, -s, -t, -cm ...). */
struct SenderOptions {
    int iters = 3;                        ///< --iters: datagrams to send, numbered #1/N .. #N/N
    std::optional<std::uint32_t> qkey;    ///< --qkey: stamp this Q_Key instead of the receiver's
    bool over_mtu = false;                ///< --over-mtu: datagram #1 is one byte above the MTU
    std::optional<ibv_wr_opcode> refused; ///< --op write|read: post one of these instead of the SENDs
};

/** @brief rdma_ud_receive's flags (besides -d, -g, -ld, -re, -t, -cm ...). */
struct ReceiverOptions {
    std::uint32_t qkey = 0x11111111; ///< --qkey: the Q_Key our QP accepts (-cm: RDMA_UDP_QKEY)
    int iters = 3;                   ///< --iters: datagrams expected
    int receives = 0;                ///< --receives: receives posted (0: one per datagram)
};

/** @brief --iters, the same on both sides. @param iters where it goes @param help its line in --help
 *  @return the flag */
inline rdma_samples::ExtraFlag iters_flag(int &iters, const std::string &help)
{
    return rdma_samples::int_flag("iters", "N", help, "3", iters, 1, rdma_samples::max_datagrams);
}

/**
 * @brief --qkey, on both sides: a Q_Key below 0x80000000 (one with the high bit set is a controlled
 * Q_Key, which only privileged QPs may send).
 * @param help its line in --help @param default_text its default @param set takes the value
 * @return the flag
 */
inline rdma_samples::ExtraFlag qkey_flag(const std::string &help, const std::string &default_text,
                                         std::function<void(std::uint32_t)> set)
{
    return {"qkey", "QKEY", help, default_text, [set = std::move(set)](const std::string &v) {
                set(static_cast<std::uint32_t>(rdma_samples::parse_number("--qkey", v, 0, 0x7fffffff)));
            }};
}

/** @brief rdma_ud_send's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec sender_spec(SenderOptions &opt)
{
    rdma_samples::ProgramSpec spec{.name = "rdma_ud_send",
                                   .role = "sender",
                                   .summary = "UD SEND, sender side: send numbered datagrams to a UD queue pair.",
                                   .message_flag = 's',
                                   .message_help = "string to send in every datagram",
                                   .resource_descriptor = false,
                                   .rdma_cm = true};
    spec.extra = {
        iters_flag(opt.iters, "datagrams to send, numbered #1/N .. #N/N"),
        qkey_flag("demonstration: stamp this Q_Key on the SENDs instead of the receiver's", "",
                  [&opt](std::uint32_t qkey) { opt.qkey = qkey; }),
        {"over-mtu", "", "demonstration: make datagram #1 one byte longer than the MTU", "",
         [&opt](const std::string &) { opt.over_mtu = true; }},
        {"op", "write|read", "demonstration: post an RDMA WRITE or READ, which UD refuses", "",
         [&opt](const std::string &v) {
             if (v != "write" && v != "read")
                 throw rdma_samples::UsageError("--op: expected write or read, got \"" + v + "\"",
                                                "UD carries SENDs only; --op shows that WRITE and READ are refused");
             opt.refused = v == "write" ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
         }},
    };
    return spec;
}

/** @brief rdma_ud_receive's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec receiver_spec(ReceiverOptions &opt)
{
    rdma_samples::ProgramSpec spec{
        .name = "rdma_ud_receive",
        .role = "receiver",
        .summary = "UD RECEIVE, receiver side: take numbered datagrams and report any that never came.",
        .resource_descriptor = false,
        .rdma_cm = true};
    spec.extra = {
        iters_flag(opt.iters, "datagrams expected"),
        qkey_flag("the Q_Key our QP accepts (ignored with -cm, which uses RDMA_UDP_QKEY 0x01234567)", "0x11111111",
                  [&opt](std::uint32_t qkey) { opt.qkey = qkey; }),
        rdma_samples::int_flag("receives", "N", "demonstration: post only N receives, fewer than the datagrams",
                               "--iters", opt.receives, 1, rdma_samples::max_datagrams),
    };
    return spec;
}

} // namespace rdma_ud
