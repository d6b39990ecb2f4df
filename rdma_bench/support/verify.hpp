/**
 * @file verify.hpp
 * @brief --verify: after the run, each side checks that what moved is what was meant to move, and says
 * so in one line ("Verified: ..."). Off when measuring: it reads every byte.
 */
#pragma once

#include "../loop.hpp"
#include "options.hpp"
#include "stats.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace rdma_bench {

/**
 * @brief The requester's check, on each QP's slice: a READ brought the responder's pattern, a ping-pong
 * brought ours back, and the last fetch-and-add (or compare-and-swap) returned the count of the
 * atomics before it.
 * @param loop the measuring loop's state (the QPs and where their data landed)
 */
inline void verify_requester(const Loop &loop)
{
    const Options &opt = loop.opt;
    const std::uint32_t last_size = opt.sizes().back();
    const bool echo = opt.mode == Mode::lat && (opt.op == Op::write || opt.op == Op::write_imm || opt.op == Op::send);
    const std::uint32_t checked = opt.op == Op::read ? last_size : echo ? last_size - 1 : 0; // bytes
    for (std::size_t q = 0; q < loop.lanes.size(); ++q) {
        const char *landing = loop.lanes[q].landing;
        const std::string on_qp = loop.lanes.size() > 1 ? " on QP " + std::to_string(q) : "";
        std::uint64_t fetched = 0;
        std::memcpy(&fetched, landing, sizeof fetched);
        if (opt.op == Op::atomic && fetched != opt.per_size() - 1)
            throw rdma_samples::Error(std::string("the last ") + (opt.cas ? "compare-and-swap" : "fetch-and-add") +
                                          on_qp + " returned " + std::to_string(fetched) + ", expected " +
                                          std::to_string(opt.per_size() - 1),
                                      "another requester may share the responder's counter");
        for (std::uint32_t i = 0; i < checked; ++i)
            if (landing[i] != pattern(i))
                throw rdma_samples::Error("byte " + std::to_string(i) + " of what came back" + on_qp +
                                              " differs from what was sent",
                                          "the data was damaged or overwritten in flight");
    }
    rdma_samples::result("Verified: %s", opt.op == Op::atomic ? opt.cas
                                                                    ? "the counter went up by one per compare-and-swap"
                                                                    : "the counter went up by one per fetch-and-add"
                                         : checked > 0        ? "the bytes that came back are the ones expected"
                                                              : "the responder checks what arrived");
}

/**
 * @brief The responder's check, on each QP's slice: the requester's bytes (WRITE, SEND, WRITE with
 * immediate), the counter (one per fetch-and-add), and every message with the right immediate value.
 * @param loop     the serving loop's state (the QPs, their messages received, immediates)
 * @param expected how many messages the requester sends on each QP (0 for one-sided operations)
 */
inline void verify_responder(const Loop &loop, std::uint64_t expected)
{
    const Options &opt = loop.opt;
    // (the last: a ping's tag)
    const std::uint32_t checked = opt.op == Op::atomic || opt.op == Op::read ? 0 : opt.sizes().back() - 1;
    for (std::size_t q = 0; q < loop.lanes.size(); ++q) {
        const Lane &lane = loop.lanes[q];
        std::uint64_t counter = 0;
        std::memcpy(&counter, lane.landing, sizeof counter);
        bool ok = opt.op != Op::atomic || counter == opt.per_size();
        for (std::uint32_t i = 0; ok && i < checked; ++i)
            ok = lane.landing[i] == pattern(i);
        if (!ok || loop.bad_imm || lane.received != expected)
            throw rdma_samples::Error(
                "the data in our memory" + (loop.lanes.size() > 1 ? " from QP " + std::to_string(q) : std::string()) +
                    " is not what the requester sent (" + std::to_string(lane.received) + " messages of " +
                    std::to_string(expected) + ", counter " + std::to_string(counter) + ")",
                "both sides must run with the same --op, --mode, --size/--all, --iters, --warmup and -q");
    }
    rdma_samples::result("Verified: %s", opt.op != Op::atomic ? "every byte is as sent"
                                         : opt.cas            ? "the counter holds one per compare-and-swap"
                                                              : "the counter holds one per fetch-and-add");
}

} // namespace rdma_bench
