/**
 * @file options.hpp
 * @brief The TCP twin's flags: those of rdma_file_transfer that apply to TCP, with the same names,
 * meanings and defaults (-lp, -sa, -t, -v, --name, --deadline; -o, --force, --max-size, --chunk), and
 * none of RDMA's (-d, -g, -sat, --slots, --id, --keys).
 */
#pragma once

#include "../support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/text.hpp>

#include <arpa/inet.h>

#include <cstdint>
#include <string>

namespace rdma_file_transfer::tcp {

/** @brief What both programs take: -lp, and -sa for the sender. */
struct Endpoint {
    std::uint16_t port = rdma_samples::default_cm_port; ///< -lp (the RDMA pair's default port)
    std::string server_addr;                            ///< -sa (the sender's; required there)
    int deadline_s = default_deadline_s;                ///< --deadline
};

/** @brief The sender's flags. */
struct SenderOptions : Endpoint {
    std::string file; ///< FILE
    std::string name; ///< --name (default: FILE's last component)
};

/** @brief The receiver's flags. */
struct ReceiverOptions : Endpoint {
    std::string out;                     ///< -o PATH|DIR (required)
    bool force = false;                  ///< --force
    std::uint32_t chunk = 1 << 20;       ///< --chunk (the RDMA receiver's default)
    std::uint64_t max_size = UINT64_MAX; ///< --max-size
};

/** @brief The spec both programs start from: no RDMA device, -lp and --deadline. */
inline rdma_samples::ProgramSpec tcp_spec(const char *name, const char *role, const char *summary, Endpoint &opt)
{
    rdma_samples::ProgramSpec spec{.name = name,
                                   .role = role,
                                   .summary = summary,
                                   .resource_descriptor = false,
                                   .rdma_device = false,
                                   .descriptor_files = false};
    spec.extra = {
        {"listen-port", "PORT", "the receiver's TCP port", std::to_string(rdma_samples::default_cm_port),
         [&opt](const std::string &v) {
             opt.port = static_cast<std::uint16_t>(rdma_samples::parse_number("-lp", v, 1, 65535));
         },
         "lp"},
        deadline_flag(opt.deadline_s),
    };
    return spec;
}

/** @brief tcp_file_sender's command line, filling @p opt. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec sender_spec(SenderOptions &opt)
{
    rdma_samples::ProgramSpec spec =
        tcp_spec("tcp_file_sender", "sender",
                 "Send FILE to tcp_file_receiver over one TCP connection, verified with SHA-256 (the TCP twin of "
                 "rdma_file_sender, to be measured beside it).",
                 opt);
    spec.extra.push_back({"server-addr", "ADDR", "the receiver's IPv4 or IPv6 address", "none: required",
                          [&opt](const std::string &v) {
                              in6_addr any{}; // (an address, never a name: a lookup would wait unbounded by -t)
                              if (inet_pton(AF_INET, v.c_str(), &any) != 1 && inet_pton(AF_INET6, v.c_str(), &any) != 1)
                                  throw rdma_samples::UsageError("-sa: expected an IPv4 or IPv6 address, got " +
                                                                 rdma_samples::quote(v));
                              opt.server_addr = v;
                          },
                          "sa"});
    file_and_name(spec, opt.file, opt.name);
    return spec;
}

/** @brief tcp_file_receiver's command line, filling @p opt. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec receiver_spec(ReceiverOptions &opt)
{
    using rdma_samples::parse_number;
    rdma_samples::ProgramSpec spec =
        tcp_spec("tcp_file_receiver", "receiver",
                 "Receive one file from tcp_file_sender over TCP, verify its SHA-256, keep it (the TCP twin of "
                 "rdma_file_receiver, to be measured beside it).",
                 opt);
    for (rdma_samples::ExtraFlag &flag : output_flags(opt.out, opt.force, opt.max_size))
        spec.extra.push_back(std::move(flag));
    spec.extra.push_back({"chunk", "BYTES", "bytes per chunk: what we recv() before we hash and write it", "1048576",
                          [&opt](const std::string &v) {
                              opt.chunk = static_cast<std::uint32_t>(parse_number("--chunk", v, 1, max_chunk));
                          }});
    return spec;
}

} // namespace rdma_file_transfer::tcp
