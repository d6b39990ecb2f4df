/**
 * @file welcome.hpp
 * @brief The few bytes rdma_event_loop's two programs agree on: the server's welcome, carried in the
 * private data of its rdma_accept(), and the client's check of it. (The reason a refusal carries in its
 * rdma_reject() is common: cm_server.hpp.)
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace rdma_event_loop {

/** @brief The server's welcome, in its REP (rdma_accept()'s private data): how many messages a client
 *  may have outstanding. Everything in it is checked by the client before use. */
struct Welcome {
    char magic[4] = {'E', 'L', 'P', '1'}; ///< "ELP1": an rdma_event_loop server, protocol 1
    std::uint8_t credits = 0;             ///< receives the server posted for this connection
    std::uint8_t reserved[3] = {};
};
static_assert(sizeof(Welcome) == 8);

/**
 * @brief The welcome in a server's accept, checked as the peer's bytes it is: at least as long as ours,
 * our magic, credits within 1..max_credits; an error names the field that is wrong (the magic quoted).
 * @param private_data the private data of the server's accept, as the CM gave it
 *                     (CmConnection::accept_private_data)
 * @param peer the server, for the error
 * @return the welcome @throws rdma_samples::Error when it is not a welcome we can use
 */
inline Welcome read_welcome(std::span<const std::uint8_t> private_data, const std::string &peer)
{
    const std::string hint = "is the server at " + peer + " an rdma_event_loop_server?";
    Welcome welcome;
    if (private_data.size() < sizeof welcome)
        throw rdma_samples::Error("the server's accept carries " + std::to_string(private_data.size()) +
                                      " bytes of private data, not an rdma_event_loop welcome (" +
                                      std::to_string(sizeof welcome) + " bytes)",
                                  hint);
    std::memcpy(&welcome, private_data.data(), sizeof welcome);
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

} // namespace rdma_event_loop
