// Completions: a wait finds its completion by wr_id, whatever order the CQ gives. These feed the
// sorting completion sequences in both orders, as a NIC may deliver them when a QP's send and receive
// queues share one CQ.
#include <rdma_samples/check.hpp>
#include <rdma_samples/completions.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace rdma_samples;

namespace {

ibv_wc completion(std::uint64_t wr_id, ibv_wc_opcode opcode, ibv_wc_status status = IBV_WC_SUCCESS)
{
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.opcode = opcode;
    wc.status = status;
    return wc;
}

/** The samples' poll loop without a device: take() what was kept, else keep() the next polled completion. */
std::optional<ibv_wc> sort_until(Completions &done, std::uint64_t wr_id, std::vector<ibv_wc> &cq)
{
    std::optional<ibv_wc> wc = done.take(wr_id);
    while (!wc && !cq.empty()) {
        const ibv_wc polled = cq.front(); // "ibv_poll_cq"
        cq.erase(cq.begin());
        done.keep(polled);
        wc = done.take(wr_id);
    }
    return wc;
}

} // namespace

// The order Soft-RoCE gives on one machine: our SEND's ACK is back before the peer's goodbye.
TEST(Completions, SendThenPeersMessage)
{
    Completions done(nullptr);
    std::vector<ibv_wc> cq = {completion(descriptor_wr_id, IBV_WC_SEND), completion(goodbye_wr_id, IBV_WC_RECV)};
    const auto send = sort_until(done, descriptor_wr_id, cq);
    ASSERT_TRUE(send);
    EXPECT_EQ(send->opcode, IBV_WC_SEND);
    EXPECT_EQ(done.kept(), 0U);
    const auto recv = sort_until(done, goodbye_wr_id, cq);
    ASSERT_TRUE(recv);
    EXPECT_EQ(recv->opcode, IBV_WC_RECV);
    EXPECT_TRUE(cq.empty());
}

// A late ACK: the peer's goodbye completes before our SEND. The wait for the SEND keeps the receive,
// and the wait for the goodbye finds it without polling again.
TEST(Completions, PeersMessageBeforeSend)
{
    Completions done(nullptr);
    std::vector<ibv_wc> cq = {completion(goodbye_wr_id, IBV_WC_RECV), completion(descriptor_wr_id, IBV_WC_SEND)};
    const auto send = sort_until(done, descriptor_wr_id, cq);
    ASSERT_TRUE(send);
    EXPECT_EQ(send->opcode, IBV_WC_SEND);
    EXPECT_EQ(done.kept(), 1U);
    EXPECT_TRUE(cq.empty());
    const auto recv = sort_until(done, goodbye_wr_id, cq);
    ASSERT_TRUE(recv);
    EXPECT_EQ(recv->opcode, IBV_WC_RECV);
    EXPECT_EQ(done.kept(), 0U);
}

// Many connections on one CQ (rdma_multi_conn): waiting for 0, 1, 2 in turn works in any arrival order.
TEST(Completions, ManyInAnyOrder)
{
    for (const std::vector<std::uint64_t> &order :
         {std::vector<std::uint64_t>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}}) {
        Completions done(nullptr);
        std::vector<ibv_wc> cq;
        for (std::uint64_t id : order)
            cq.push_back(completion(id, IBV_WC_RECV));
        for (std::uint64_t id = 0; id < 3; ++id) {
            const auto wc = sort_until(done, id, cq);
            ASSERT_TRUE(wc);
            EXPECT_EQ(wc->wr_id, id);
        }
        EXPECT_EQ(done.kept(), 0U);
    }
}

TEST(Completions, TakeNothingKept)
{
    Completions done(nullptr);
    EXPECT_FALSE(done.take(1));
    done.keep(completion(2, IBV_WC_SEND));
    EXPECT_FALSE(done.take(1));
    EXPECT_TRUE(done.take(2));
    EXPECT_FALSE(done.take(2));
}

// The first real failure, not the flushes after it, is the cause.
TEST(Completions, FirstErrorIgnoresFlushes)
{
    Completions done(nullptr);
    EXPECT_FALSE(done.first_error());
    done.keep(completion(3, IBV_WC_SEND));
    done.keep(completion(4, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR));
    EXPECT_FALSE(done.first_error());
    done.keep(completion(5, IBV_WC_SEND, IBV_WC_RETRY_EXC_ERR));
    done.keep(completion(6, IBV_WC_SEND, IBV_WC_REM_ACCESS_ERR));
    ASSERT_TRUE(done.first_error());
    EXPECT_EQ(done.first_error()->wr_id, 5U);
    EXPECT_EQ(done.first_error()->status, IBV_WC_RETRY_EXC_ERR);
}

// Two completions of one wr_id (a request posted again): the older is taken first.
TEST(Completions, SameWrIdOldestFirst)
{
    Completions done(nullptr);
    done.keep(completion(7, IBV_WC_RDMA_WRITE));
    done.keep(completion(7, IBV_WC_RDMA_READ));
    EXPECT_EQ(done.take(7)->opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(done.take(7)->opcode, IBV_WC_RDMA_READ);
}

TEST(Completions, AsyncEventNames)
{
    EXPECT_STREQ(async_event_name(IBV_EVENT_QP_FATAL), "IBV_EVENT_QP_FATAL");
    EXPECT_STREQ(async_event_name(IBV_EVENT_CQ_ERR), "IBV_EVENT_CQ_ERR");
    EXPECT_STREQ(async_event_name(IBV_EVENT_PORT_ERR), "IBV_EVENT_PORT_ERR");
}
