/**
 * @file options.hpp
 * @brief rdma_recovery's command lines: each program's own flags (the common ones are in Args) and its
 * ProgramSpec.
 */
#pragma once

#include "slots.hpp"

#include <rdma_samples/args.hpp>

#include <string>

namespace rdma_recovery {

/** @brief The requester's flags (besides -d, -g, -ld, -re, -m, -t, -v). */
struct RequesterOptions {
    int count = 6;           ///< --count: WRITEs, one per slot
    int fail_at = 4;         ///< --fail-at: the WRITE posted with a wrong rkey (0: none)
    bool err_to_rts = false; ///< --try-err-to-rts: ask for ERR -> RTS first, to see the refusal
};

/** @brief rdma_recovery_client's flags (besides -sa, -lp, -t ...). */
struct ClientOptions {
    int count = 6;       ///< --count: messages, one per slot
    int interval_ms = 0; ///< --interval-ms: pause before each message (time to kill the server midway)
};

/** @brief rdma_recovery_server's flags (besides -lp, -t ...). */
struct ServerOptions {
    int clients = 1; ///< --clients: end after this many connections, finished or broken
};

/** @brief The requester's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec requester_spec(RequesterOptions &opt)
{
    rdma_samples::ProgramSpec spec{.name = "rdma_recovery_requester",
                                   .role = "requester",
                                   .summary = "Recovery, requester side: RDMA WRITEs, one on purpose with a wrong "
                                              "rkey; drain the flushes, bring both QPs back, write the rest."};
    spec.extra = {
        rdma_samples::int_flag("count", "N", "RDMA WRITEs to post, one per slot of the responder's memory", "6",
                               opt.count, 1, max_slots),
        rdma_samples::int_flag("fail-at", "K",
                               "post WRITE #K with a wrong rkey: it fails, the ones behind it are flushed (0: none)",
                               "4", opt.fail_at, 0, max_slots),
        {"try-err-to-rts", "", "before the way through RESET, ask for ERR -> RTS directly and print the refusal", "",
         [&opt](const std::string &) { opt.err_to_rts = true; }},
    };
    return spec;
}

/** @brief The responder's command line. @return the spec */
inline rdma_samples::ProgramSpec responder_spec()
{
    return {.name = "rdma_recovery_responder",
            .role = "responder",
            .summary = "Recovery, responder side: export 16 slots, see the QP fail, bring it back with the "
                       "requester, print the memory before and after."};
}

/** @brief rdma_recovery_client's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec client_spec(ClientOptions &opt)
{
    rdma_samples::ProgramSpec spec = rdma_samples::cm_only_spec(
        "rdma_recovery_client", "client",
        "Recovery with RDMA CM, client side: N messages that survive a server killed and restarted (new cm_id, "
        "new QP, new rkey).");
    spec.extra = {
        rdma_samples::int_flag("count", "N",
                               "messages (RDMA WRITEs with immediate), one per slot of the server's memory", "6",
                               opt.count, 1, max_slots),
        rdma_samples::int_flag("interval-ms", "MS",
                               "pause before each message, watching the CM channel (a slow client)", "0",
                               opt.interval_ms, 0, 60000),
    };
    return spec;
}

/** @brief rdma_recovery_server's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec server_spec(ServerOptions &opt)
{
    rdma_samples::ProgramSpec spec = rdma_samples::cm_only_spec(
        "rdma_recovery_server", "server",
        "Recovery with RDMA CM, server side: export 16 slots, serve one client after another, each until it "
        "disconnects or dies.");
    spec.extra = {
        rdma_samples::int_flag("clients", "N", "end after N connections, finished or broken", "1", opt.clients, 1,
                               1000),
    };
    return spec;
}

} // namespace rdma_recovery
