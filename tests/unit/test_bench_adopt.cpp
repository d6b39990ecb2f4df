/**
 * @file test_bench_adopt.cpp
 * @brief rdma_bench's CompletionWaiter takes over the receives the set-up's waits polled and kept: the
 * responder's set-up waits for its descriptor's SEND, whose ACK may be lost and resent, and the
 * requester's first messages (or its goodbye) complete meanwhile. They must reach the measuring loop.
 */
#include "rdma_bench/cq_wait.hpp"

#include <gtest/gtest.h>

using namespace rdma_samples;

namespace {

ibv_wc received(std::uint64_t wr_id, std::uint32_t byte_len)
{
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = byte_len;
    return wc;
}

} // namespace

// Kept: a message, our descriptor's SEND (the set-up's own), the goodbye. The loop gets the two
// receives, in the order they were polled, at most a batch at a time, before it polls the CQ (which,
// with no CQ here, would fail).
TEST(BenchCompletionWaiter, AdoptedReceivesComeFirstInOrderByBatch)
{
    constexpr std::uint64_t recv_id = UINT64_MAX, own_send = 0xde5c;
    Completions kept(nullptr);
    kept.keep(received(recv_id, 64));
    kept.keep(received(own_send, 0));
    kept.keep(received(recv_id, 0));
    rdma_bench::CompletionWaiter waiter(nullptr, nullptr, 1, 5);
    waiter.adopt(kept, recv_id);
    ASSERT_EQ(waiter.wait("a message"), 1);
    EXPECT_EQ(waiter.wc(0).byte_len, 64U);
    ASSERT_EQ(waiter.wait("the goodbye"), 1);
    EXPECT_EQ(waiter.wc(0).byte_len, 0U);
    ibv_wc wc{};
    EXPECT_TRUE(kept.take(own_send, wc)); // the set-up's own completion stays where it was
    EXPECT_FALSE(kept.take(recv_id, wc));
}

TEST(BenchCompletionWaiter, AdoptedReceivesFillABatch)
{
    Completions kept(nullptr);
    for (std::uint32_t i = 1; i <= 3; ++i)
        kept.keep(received(7, i));
    rdma_bench::CompletionWaiter waiter(nullptr, nullptr, 16, 5);
    waiter.adopt(kept, 7);
    ASSERT_EQ(waiter.wait("the messages"), 3);
    EXPECT_EQ(waiter.wc(2).byte_len, 3U);
}
