/**
 * @file recovery.hpp
 * @brief rdma_recovery's bookkeeping: the four programs' flags, the slots of memory and how they are
 * printed, the async events and the second round's timeout hint. The recovery itself is in the lesson
 * files: the flush, RESET and the new PSNs in requester.cpp and responder.cpp, the reconnect in
 * client.cpp and server.cpp.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>

#include <infiniband/verbs.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace recovery {

/** @brief Bytes of one slot: WRITE #i lands in slot i of the responder's memory. */
inline constexpr std::size_t slot_size = 32;
/** @brief Slots the responder exports, and so the most WRITEs a requester may post (a send queue of 16). */
inline constexpr int max_slots = 16;
/** @brief How often either side brings its QP back before it gives up: a peer that fails every
 *  connection is not worth more (each try is bounded by -t as well). */
inline constexpr int max_recoveries = 3;

/** @brief The requester's flags (besides -d, -g, -ld, -re, -m, -t, -v). */
struct Options {
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

/** @brief What WRITE @p i (from 1) carries, and what slot @p i holds after it.
 *  @param i the WRITE's number @return the text */
inline std::string slot_text(int i)
{
    return "write #" + std::to_string(i);
}

/** @brief The sender's memory: slot i (from 1) holds slot_text(i), for the @p count slots it sends and
 *  no more (what is registered is what the device may read). @param count slots @return the buffer */
inline rdma_samples::Buffer source_slots(int count)
{
    rdma_samples::Buffer buf(static_cast<std::size_t>(count) * slot_size);
    for (int i = 1; i <= count; ++i)
        std::memcpy(buf.data() + (i - 1) * slot_size, slot_text(i).data(), slot_text(i).size());
    return buf;
}

/**
 * @brief Print the responder's slots: the text in each, or "(empty)". Slots are zero-filled at start,
 * and what lands in one is a WRITE's bytes: printed quoted and bounded by the slot.
 * @param owner  whose memory, e.g. "Responder"
 * @param memory the exported buffer, max_slots x slot_size bytes
 * @param when   e.g. "before the recovery"
 */
inline void print_slots(const char *owner, const char *memory, const char *when)
{
    rdma_samples::result("%s memory %s:", owner, when);
    int last = max_slots; // slots after the last written one are not printed
    while (last > 0 && memory[(last - 1) * slot_size] == '\0')
        --last;
    for (int i = 0; i < last; ++i) {
        const char *slot = memory + static_cast<std::size_t>(i) * slot_size;
        const std::size_t len = strnlen(slot, slot_size);
        if (len == 0)
            rdma_samples::result("  slot %d: (empty)", i + 1);
        else
            rdma_samples::result("  slot %d: \"%.*s\"", i + 1, static_cast<int>(len), slot);
    }
}

/**
 * @brief The device's asynchronous events so far (take_async_events()), or "none". The IBTA lets a
 * device report a responder's refused request as IBV_EVENT_QP_ACCESS_ERR; Soft-RoCE reports nothing.
 * @param ctx the device @return the events, or "none"
 */
inline std::string async_events_or_none(ibv_context *ctx)
{
    const std::string events = rdma_samples::take_async_events(ctx);
    return events.empty() ? "none" : events;
}

/**
 * @brief The second round of descriptors: wait_for_connection_descriptor(), and on a timeout the
 * recovery's own hint instead of "start the peer", which the first round gives.
 * @param w what to wait for @param hint what to check when nothing comes @return the descriptor
 */
inline rdma_samples::ConnectionDescriptor wait_with_hint(const rdma_samples::WaitFor &w, const std::string &hint)
{
    try {
        return rdma_samples::wait_for_connection_descriptor(w);
    } catch (const rdma_samples::DescriptorError &) {
        throw; // a malformed file: its own hint says where a good one comes from
    } catch (const rdma_samples::Error &e) {
        throw rdma_samples::Error(e.what(), hint);
    }
}

/** @brief The requester's command line. @param opt where the values go @return the spec */
inline rdma_samples::ProgramSpec requester_spec(Options &opt)
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

/** @brief The responder's command line. @return the spec */
inline rdma_samples::ProgramSpec responder_spec()
{
    return {.name = "rdma_recovery_responder",
            .role = "responder",
            .summary = "Recovery, responder side: export 16 slots, see the QP fail, bring it back with the "
                       "requester, print the memory before and after."};
}

} // namespace recovery
