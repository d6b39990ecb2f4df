/**
 * @file test_event_loop_welcome.cpp
 * @brief rdma_event_loop's client reads the server's welcome (rdma_event_loop/welcome.hpp, read_welcome())
 * from the private data of a REP, without a device: its length, magic and credits, at each bound and
 * one past it, each error naming the field.
 */
#include "rdma_event_loop/welcome.hpp"

#include <rdma_samples/check.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using rdma_event_loop::max_credits;
using rdma_event_loop::read_welcome;

namespace {

/** A welcome's 8 bytes as a server puts them into rdma_accept()'s private data. */
std::vector<std::uint8_t> welcome_bytes(std::uint8_t credits, const char *magic = "ELP1")
{
    return {static_cast<std::uint8_t>(magic[0]),
            static_cast<std::uint8_t>(magic[1]),
            static_cast<std::uint8_t>(magic[2]),
            static_cast<std::uint8_t>(magic[3]),
            credits,
            0,
            0,
            0};
}

/** What read_welcome() threw for @p data (a vector of exactly its size, so that AddressSanitizer sees
 *  any read past it), or "(nothing thrown)". */
std::string welcome_error(const std::vector<std::uint8_t> &data)
{
    try {
        read_welcome(data, "10.77.0.1");
    } catch (const rdma_samples::Error &e) {
        EXPECT_EQ(std::string(e.hint()), "is the server at 10.77.0.1 an rdma_event_loop_server?");
        return e.what();
    }
    return "(nothing thrown)";
}

} // namespace

TEST(EventLoopWelcome, OneToSixteenCreditsAreRead)
{
    EXPECT_EQ(read_welcome(welcome_bytes(1), "10.77.0.1").credits, 1);
    EXPECT_EQ(read_welcome(welcome_bytes(4), "10.77.0.1").credits, 4);
    EXPECT_EQ(read_welcome(welcome_bytes(max_credits), "10.77.0.1").credits, 16);
}

TEST(EventLoopWelcome, PrivateDataPastTheWelcomeIsIgnored)
{
    // On InfiniBand and RoCE the REP carries 196 bytes of private data, the welcome in the first 8;
    // what follows, and the 3 reserved bytes, are not read.
    std::vector<std::uint8_t> rep(196, 0xee);
    const std::vector<std::uint8_t> welcome = welcome_bytes(2);
    std::copy(welcome.begin(), welcome.begin() + 5, rep.begin());
    EXPECT_EQ(read_welcome(rep, "10.77.0.1").credits, 2);
    std::vector<std::uint8_t> longest(255, 0);
    std::copy(welcome.begin(), welcome.end(), longest.begin());
    EXPECT_EQ(read_welcome(longest, "10.77.0.1").credits, 2);
}

TEST(EventLoopWelcome, LessThanAWelcomeIsRejectedWithoutReadingPastIt)
{
    // An accept with no private data: no pointer at all.
    EXPECT_EQ(welcome_error({}),
              "the server's accept carries 0 bytes of private data, not an rdma_event_loop welcome (8 bytes)");
    std::vector<std::uint8_t> seven = welcome_bytes(4);
    seven.pop_back();
    EXPECT_EQ(welcome_error(seven),
              "the server's accept carries 7 bytes of private data, not an rdma_event_loop welcome (8 bytes)");
    EXPECT_EQ(welcome_error({'E', 'L', 'P', '1'}),
              "the server's accept carries 4 bytes of private data, not an rdma_event_loop welcome (8 bytes)");
}

TEST(EventLoopWelcome, AnotherMagicIsRejected)
{
    EXPECT_EQ(welcome_error(welcome_bytes(4, "ELP2")), // another protocol version
              R"(the server's welcome starts with "ELP2", not rdma_event_loop's "ELP1")");
    EXPECT_EQ(welcome_error(welcome_bytes(4, "elp1")),
              R"(the server's welcome starts with "elp1", not rdma_event_loop's "ELP1")");
    // The peer's bytes are quoted: no raw control byte reaches the terminal.
    EXPECT_EQ(welcome_error(welcome_bytes(4, "\x1b[2J")),
              R"(the server's welcome starts with "\x1b[2J", not rdma_event_loop's "ELP1")");
    EXPECT_EQ(welcome_error(welcome_bytes(4, "\0\0\0\0")),
              R"(the server's welcome starts with "\x00\x00\x00\x00", not rdma_event_loop's "ELP1")");
}

TEST(EventLoopWelcome, CreditsOutsideOneToSixteenAreRejected)
{
    EXPECT_EQ(welcome_error(welcome_bytes(0)), "the server's welcome grants 0 credits; expected 1 to 16");
    EXPECT_EQ(welcome_error(welcome_bytes(max_credits + 1)),
              "the server's welcome grants 17 credits; expected 1 to 16");
    EXPECT_EQ(welcome_error(welcome_bytes(255)), "the server's welcome grants 255 credits; expected 1 to 16");
}
