/**
 * @file options.hpp
 * @brief rdma_event_loop's command lines: each program's own flags (the common ones are in Args), its
 * ProgramSpec, and the descriptor-file flags both refuse with the reason.
 */
#pragma once

#include <rdma_samples/args.hpp>

#include <string>

namespace rdma_event_loop {

/** @brief The server's flags (besides -d, -g, -lp, -t, -v). */
struct ServerOptions {
    int clients = 0;        ///< --clients: end after serving this many (0: until SIGINT or SIGTERM)
    int max_clients = 128;  ///< --max-clients: connections at once; one more is refused
    int credits = 4;        ///< --credits: receives posted per connection = messages a client may have out
    int message_size = 256; ///< --message-size: bytes of each posted receive; a longer SEND fails
};

/** @brief The client's flags (besides -sa, -lp, -s, -t ...). */
struct ClientOptions {
    int count = 5;       ///< --count: messages to send, each echoed
    int interval_ms = 0; ///< --interval-ms: pause before each message (a slow or idle client)
};

/** @brief The most credits a server grants (--credits), and so receives a client posts. */
inline constexpr int max_credits = 16;

/** @brief rdma_event_loop_server's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec server_spec(ServerOptions &opt)
{
    rdma_samples::ProgramSpec spec =
        rdma_samples::cm_only_spec("rdma_event_loop_server", "server",
                                   "One thread, one epoll: echo the messages of many RDMA CM "
                                   "clients at once.");
    spec.extra = {
        rdma_samples::int_flag("clients", "N", "end after serving N clients (0: until SIGINT or SIGTERM)", "0",
                               opt.clients, 0, 1000000),
        rdma_samples::int_flag("max-clients", "N", "clients connected at once; one more is refused (rdma_reject)",
                               "128", opt.max_clients, 1, 1024),
        rdma_samples::int_flag("credits", "N", "receives posted per client: messages it may have outstanding", "4",
                               opt.credits, 1, max_credits),
        rdma_samples::int_flag("message-size", "BYTES",
                               "bytes of each receive; a longer SEND fails the client's connection", "256",
                               opt.message_size, 1, rdma_samples::max_message_length),
    };
    return spec;
}

/** @brief rdma_event_loop_client's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec client_spec(ClientOptions &opt)
{
    rdma_samples::ProgramSpec spec =
        rdma_samples::cm_only_spec("rdma_event_loop_client", "client",
                                   "Send N messages to rdma_event_loop_server, check each echo byte for byte.");
    spec.message_flag = 's';
    spec.message_help = "the text of each message (\" #i\" is appended)";
    spec.extra = {
        rdma_samples::int_flag("count", "N", "messages to send, each echoed back", "5", opt.count, 1, 100000),
        rdma_samples::int_flag("interval-ms", "MS",
                               "pause before each message in ms (a slow client; longer than the server's -t: "
                               "an idle one)",
                               "0", opt.interval_ms, 0, 3600 * 1000),
    };
    return spec;
}

/** @brief Refuse the descriptor-file flags with the reason: the lesson is an RDMA CM server.
 *  @param spec the program's spec, to which -ld and -re are added as refusals */
inline void refuse_descriptor_files(rdma_samples::ProgramSpec &spec)
{
    for (const char *name : {"local-descriptor-path", "remote-descriptor-path"})
        spec.extra.push_back({name, "PATH", "refused: this program connects with RDMA CM only", "",
                              [](const std::string &) {
                                  throw rdma_samples::UsageError(
                                      "descriptor files make no sense for a server of many dynamic clients: "
                                      "rdma_event_loop connects with RDMA CM only",
                                      "leave -ld/-re out; the server listens on -lp, each client gives -sa ADDR");
                              },
                              name[0] == 'l' ? "ld" : "re"});
}

} // namespace rdma_event_loop
