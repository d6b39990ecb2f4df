/**
 * @file test_completions.cpp
 * @brief Completions: a wait finds its completion by wr_id, whatever order the CQ gives. These feed
 * the sorting completion sequences in both orders, as a NIC may deliver them when a QP's send and
 * receive queues share one CQ.
 */
#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace rdma_samples;

namespace {

/** take() as an optional, for EXPECTs. */
std::optional<ibv_wc> take(Completions &completions, std::uint64_t wr_id)
{
    ibv_wc wc{};
    if (completions.take(wr_id, wc))
        return wc;
    return std::nullopt;
}

ibv_wc completion(std::uint64_t wr_id, ibv_wc_opcode opcode, ibv_wc_status status = IBV_WC_SUCCESS)
{
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.opcode = opcode;
    wc.status = status;
    return wc;
}

/** The samples' poll loop without a device: take() what was kept, else keep() the next polled completion. */
std::optional<ibv_wc> sort_until(Completions &completions, std::uint64_t wr_id, std::vector<ibv_wc> &cq)
{
    std::optional<ibv_wc> wc = take(completions, wr_id);
    while (!wc && !cq.empty()) {
        const ibv_wc polled = cq.front(); // "ibv_poll_cq"
        cq.erase(cq.begin());
        completions.keep(polled);
        wc = take(completions, wr_id);
    }
    return wc;
}

} // namespace

// The order Soft-RoCE gives on one machine: our SEND's ACK is back before the peer's goodbye.
TEST(Completions, SendThenPeersMessage)
{
    Completions completions(nullptr);
    std::vector<ibv_wc> cq = {completion(descriptor_wr_id, IBV_WC_SEND), completion(goodbye_wr_id, IBV_WC_RECV)};
    const auto send = sort_until(completions, descriptor_wr_id, cq);
    ASSERT_TRUE(send);
    EXPECT_EQ(send->opcode, IBV_WC_SEND);
    EXPECT_EQ(completions.kept(), 0U);
    const auto recv = sort_until(completions, goodbye_wr_id, cq);
    ASSERT_TRUE(recv);
    EXPECT_EQ(recv->opcode, IBV_WC_RECV);
    EXPECT_TRUE(cq.empty());
}

// A late ACK: the peer's goodbye completes before our SEND. The wait for the SEND keeps the receive,
// and the wait for the goodbye finds it without polling again.
TEST(Completions, PeersMessageBeforeSend)
{
    Completions completions(nullptr);
    std::vector<ibv_wc> cq = {completion(goodbye_wr_id, IBV_WC_RECV), completion(descriptor_wr_id, IBV_WC_SEND)};
    const auto send = sort_until(completions, descriptor_wr_id, cq);
    ASSERT_TRUE(send);
    EXPECT_EQ(send->opcode, IBV_WC_SEND);
    EXPECT_EQ(completions.kept(), 1U);
    EXPECT_TRUE(cq.empty());
    const auto recv = sort_until(completions, goodbye_wr_id, cq);
    ASSERT_TRUE(recv);
    EXPECT_EQ(recv->opcode, IBV_WC_RECV);
    EXPECT_EQ(completions.kept(), 0U);
}

// Many connections on one CQ (rdma_multi_conn): waiting for 0, 1, 2 in turn works in any arrival order.
TEST(Completions, ManyInAnyOrder)
{
    for (const std::vector<std::uint64_t> &order :
         {std::vector<std::uint64_t>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}}) {
        Completions completions(nullptr);
        std::vector<ibv_wc> cq;
        for (std::uint64_t id : order)
            cq.push_back(completion(id, IBV_WC_RECV));
        for (std::uint64_t id = 0; id < 3; ++id) {
            const auto wc = sort_until(completions, id, cq);
            ASSERT_TRUE(wc);
            EXPECT_EQ(wc->wr_id, id);
        }
        EXPECT_EQ(completions.kept(), 0U);
    }
}

TEST(Completions, TakeNothingKept)
{
    Completions completions(nullptr);
    EXPECT_FALSE(take(completions, 1));
    completions.keep(completion(2, IBV_WC_SEND));
    EXPECT_FALSE(take(completions, 1));
    EXPECT_TRUE(take(completions, 2));
    EXPECT_FALSE(take(completions, 2));
}

// The first real failure, not the flushes after it, is the cause.
TEST(Completions, FirstErrorIgnoresFlushes)
{
    Completions completions(nullptr);
    EXPECT_FALSE(completions.first_error());
    completions.keep(completion(3, IBV_WC_SEND));
    completions.keep(completion(4, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR));
    EXPECT_FALSE(completions.first_error());
    completions.keep(completion(5, IBV_WC_SEND, IBV_WC_RETRY_EXC_ERR));
    completions.keep(completion(6, IBV_WC_SEND, IBV_WC_REM_ACCESS_ERR));
    ASSERT_TRUE(completions.first_error());
    EXPECT_EQ(completions.first_error()->wr_id, 5U);
    EXPECT_EQ(completions.first_error()->status, IBV_WC_RETRY_EXC_ERR);
}

// Two completions of one wr_id (a request posted again): the older is taken first.
TEST(Completions, SameWrIdOldestFirst)
{
    Completions completions(nullptr);
    completions.keep(completion(7, IBV_WC_RDMA_WRITE));
    completions.keep(completion(7, IBV_WC_RDMA_READ));
    EXPECT_EQ(take(completions, 7)->opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(take(completions, 7)->opcode, IBV_WC_RDMA_READ);
}

TEST(Completions, AsyncEventNames)
{
    EXPECT_STREQ(async_event_name(IBV_EVENT_QP_FATAL), "IBV_EVENT_QP_FATAL");
    EXPECT_STREQ(async_event_name(IBV_EVENT_CQ_ERR), "IBV_EVENT_CQ_ERR");
    EXPECT_STREQ(async_event_name(IBV_EVENT_PORT_ERR), "IBV_EVENT_PORT_ERR");
}
