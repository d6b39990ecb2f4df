/**
 * @file options.hpp
 * @brief rdma_event_loop's own flags and the few bytes its two programs agree on: the server's welcome,
 * carried in the private data of its rdma_accept(), and the reason carried by its rdma_reject().
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace event_loop {

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

/** @brief The server's welcome, in its REP (rdma_accept()'s private data): how many messages a client
 *  may have outstanding. Everything in it is checked by the client before use. */
struct Welcome {
    char magic[4] = {'E', 'L', 'P', '1'}; ///< "ELP1": an rdma_event_loop server, protocol 1
    std::uint8_t credits = 0;             ///< receives the server posted for this connection
    std::uint8_t reserved[3] = {};
};
static_assert(sizeof(Welcome) == 8);

/** @brief The most credits a server grants, and so receives a client posts. */
inline constexpr int max_credits = 16;

/**
 * @brief The welcome in a server's REP, checked as the peer's text it is: at least as long as ours, our
 * magic, credits within 1..max_credits; an error names the field that is wrong (the magic quoted).
 * @param conn the CONNECT_RESPONSE (or ESTABLISHED) event's connection parameters
 * @param peer the server, for the error
 * @return the welcome @throws rdma_samples::Error when it is not a welcome we can use
 */
inline Welcome read_welcome(const rdma_conn_param &conn, const std::string &peer)
{
    const std::string hint = "is the server at " + peer + " an rdma_event_loop_server?";
    Welcome welcome;
    if (conn.private_data_len < sizeof welcome)
        throw rdma_samples::Error("the server's accept carries " + std::to_string(conn.private_data_len) +
                                      " bytes of private data, not an rdma_event_loop welcome (" +
                                      std::to_string(sizeof welcome) + " bytes)",
                                  hint);
    std::memcpy(&welcome, conn.private_data, sizeof welcome);
    if (std::memcmp(welcome.magic, "ELP1", 4) != 0)
        throw rdma_samples::Error("the server's welcome starts with " +
                                      rdma_samples::quote(std::string(welcome.magic, sizeof welcome.magic)) +
                                      ", not rdma_event_loop's \"ELP1\"",
                                  hint);
    if (welcome.credits < 1 || welcome.credits > max_credits)
        throw rdma_samples::Error("the server's welcome grants " + std::to_string(welcome.credits) +
                                      " credits; expected 1 to " + std::to_string(max_credits),
                                  hint);
    return welcome;
}

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

} // namespace event_loop
