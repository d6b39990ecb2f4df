/**
 * @file options.hpp
 * @brief rdma_multi_conn's command lines (-nc on both programs, -cm with or without -sa), and the flow
 * they choose: descriptor files, an RDMA CM client, or an RDMA CM server.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>

#include <string>

namespace rdma_multi_conn {

/** @brief How a program connects, as its flags say. */
enum class Flow {
    descriptor_files, ///< without -cm: one descriptor file per connection, "<path>-0000" ...
    cm_client,        ///< -cm -sa ADDR: one client of the other program's server
    cm_server,        ///< -cm without -sa: the server of -nc clients
};

/** @brief The flow @p args choose. @param args the parsed flags @return it */
inline Flow flow_of(const rdma_samples::Args &args)
{
    if (!args.use_cm)
        return Flow::descriptor_files;
    return args.server_addr ? Flow::cm_client : Flow::cm_server;
}

/** @brief How many connections (and QPs) @p flow makes: one as a client, -nc otherwise.
 *  @param args the parsed flags @param flow flow_of(args) @return it */
inline int connections(const rdma_samples::Args &args, Flow flow)
{
    return flow == Flow::cm_client ? 1 : args.num_connections;
}

/** @brief rdma_multi_conn_send's command line. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec sender_spec()
{
    rdma_samples::ProgramSpec spec{
        .name = "rdma_multi_conn_send",
        .role = "sender",
        .summary = "Many connections, sender side: one RC QP per receiver, SEND the same string on each.",
        .message_flag = 's',
        .message_help = "string to send",
        .resource_descriptor = false,
        .multi_conn = true,
        .rdma_cm = true};
    // A shared receive queue holds receives, and a sender posts none: say where the flag belongs.
    spec.extra.push_back({"srq", "", "receiver only (rdma_srq_receive); refused here", "", [](const std::string &) {
                              throw rdma_samples::UsageError(
                                  "--srq applies to the receiving side: an SRQ holds receives, and a sender posts none",
                                  "run rdma_srq_receive as the receiver; this sender stays as it is");
                          }});
    return spec;
}

/** @brief rdma_multi_conn_receive's command line. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec receiver_spec()
{
    return {.name = "rdma_multi_conn_receive",
            .role = "receiver",
            .summary = "Many connections, receiver side: one RC QP per sender, print the message each sends.",
            .resource_descriptor = false,
            .multi_conn = true,
            .rdma_cm = true};
}

} // namespace rdma_multi_conn
