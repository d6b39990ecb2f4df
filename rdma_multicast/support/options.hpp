/**
 * @file options.hpp
 * @brief rdma_multicast's command lines: the group both sides name (--group), how many datagrams
 * (--iters), and each ProgramSpec. The common flags (-d, -g, -t, -s) are in Args.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/datagrams.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

namespace rdma_multicast {

/** @brief The flags of both programs (besides -d, -g, -t and the sender's -s). */
struct Options {
    std::string group = "239.1.2.3"; ///< --group: the IPv4 multicast group both sides name
    int iters = 3;                   ///< --iters: datagrams to send, or the most a receiver takes
    bool loopback = false;           ///< --loopback (sender): attach our own QP too, count our copies
    bool block_loopback = false;     ///< --block-loopback (sender): the same, the QP asking for none
};

/** @brief --group: an IPv4 multicast address (224.0.0.0/4), parsed before any device is opened.
 *  @param opt where the value goes @return the flag */
inline rdma_samples::ExtraFlag group_flag(Options &opt)
{
    return {"group", "ADDR", "the IPv4 multicast group to join (224.0.0.0 to 239.255.255.255)", "239.1.2.3",
            [&opt](const std::string &v) {
                in_addr a{};
                if (inet_pton(AF_INET, v.c_str(), &a) != 1 || !IN_MULTICAST(ntohl(a.s_addr)))
                    throw rdma_samples::UsageError("--group: \"" + v + "\" is not an IPv4 multicast address",
                                                   "a group is in 224.0.0.0/4; 239.0.0.0/8 is for local use");
                opt.group = v;
            }};
}

/** @brief rdma_multicast_send's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec sender_spec(Options &opt)
{
    rdma_samples::ProgramSpec spec{
        .name = "rdma_multicast_send",
        .role = "sender",
        .summary = "Multicast, sender side: join a group as a send-only member, send it numbered datagrams.",
        .message_flag = 's',
        .message_help = "string to send in every datagram",
        .resource_descriptor = false,
        .descriptor_files = false};
    spec.extra = {
        group_flag(opt),
        rdma_samples::int_flag("iters", "N", "datagrams to send, numbered #1/N .. #N/N", "3", opt.iters, 1,
                               rdma_samples::max_datagrams),
        {"loopback", "", "demonstration: attach our own QP to the group too, and count our datagrams that come back",
         "", [&opt](const std::string &) { opt.loopback = true; }},
        {"block-loopback", "",
         "demonstration: as --loopback, with the QP created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB", "",
         [&opt](const std::string &) { opt.loopback = opt.block_loopback = true; }},
    };
    return spec;
}

/** @brief rdma_multicast_receive's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec receiver_spec(Options &opt)
{
    rdma_samples::ProgramSpec spec{
        .name = "rdma_multicast_receive",
        .role = "receiver",
        .summary = "Multicast, receiver side: join a group, take its datagrams, report any that never came.",
        .resource_descriptor = false,
        .descriptor_files = false};
    spec.extra = {group_flag(opt), rdma_samples::int_flag("iters", "N", "datagrams expected (receives posted)", "3",
                                                          opt.iters, 1, rdma_samples::max_datagrams)};
    return spec;
}

} // namespace rdma_multicast
