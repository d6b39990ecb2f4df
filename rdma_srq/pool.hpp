/**
 * @file pool.hpp
 * @brief The shared receive queue's pool: post a slot into it, refill a slot as its message is taken,
 * arm the SRQ limit, and take the limit event from the device's async fd.
 */
#pragma once

#include <rdma_samples/async_events.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>

#include <cstdint>
#include <string>

namespace rdma_srq {

using namespace rdma_samples;

/** The pool: one SRQ, the buffer its receives land in, the limit we arm. */
struct Pool {
    ibv_srq *srq;
    const Buffer &buf;
    const ibv_mr *mr;
    std::uint32_t limit; ///< the SRQ limit we arm, and re-arm after each event
};

/** Post buffer slot @p slot into the SRQ: whichever QP's message comes first takes it. */
inline void post_srq_receive(const Pool &pool, std::uint64_t slot)
{
    //! [post_srq_recv]
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(pool.buf.data() + slot * max_message_length);
    sge.length = static_cast<std::uint32_t>(max_message_length);
    sge.lkey = pool.mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot; // comes back in the completion: which slot holds the message
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_srq_recv(pool.srq, &wr, &bad_wr), "ibv_post_srq_recv(slot " + std::to_string(slot) + ")");
    //! [post_srq_recv]
}

/** A message arrived in slot wc.wr_id: print it, then give the slot back to the pool. */
inline void take_message(const Pool &pool, const ibv_wc &wc, int connection)
{
    //! [refill]
    const char *msg = pool.buf.data() + wc.wr_id * max_message_length; // print it before the slot is reused
    result("Got from sender: \"%.*s\", connection %d", static_cast<int>(wc.byte_len), msg, connection);
    post_srq_receive(pool, wc.wr_id); // the slot this message came in goes back to the pool
    //! [refill]
}

/** Arm the SRQ limit: the device raises IBV_EVENT_SRQ_LIMIT_REACHED once fewer than pool.limit receives
 *  are left in it. One shot: it disarms itself when it fires. */
inline void arm_srq_limit(const Pool &pool)
{
    //! [arm_limit]
    ibv_srq_attr attr{};
    attr.srq_limit = pool.limit;
    check_rc(ibv_modify_srq(pool.srq, &attr, IBV_SRQ_LIMIT),
             "ibv_modify_srq(IBV_SRQ_LIMIT " + std::to_string(pool.limit) + ")");
    //! [arm_limit]
}

/** Post every slot into the SRQ, then arm its limit. */
inline void fill_pool(const Pool &pool, std::uint32_t size)
{
    for (std::uint32_t i = 0; i < size; ++i)
        post_srq_receive(pool, i);
    arm_srq_limit(pool);
}

/** Take the async events already queued, without waiting: print each, re-arm the SRQ limit after its event.
 *  Call it after taking the completions, so that their slots are refilled first. */
inline void take_async_events(ibv_context *ctx, const Pool &pool)
{
    //! [async]
    for_each_async_event(ctx, [&](const ibv_async_event &ev) { // taken and acknowledged (async_events.cpp)
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
            info("IBV_EVENT_SRQ_LIMIT_REACHED: fewer than %u receives were left in the SRQ; refilled, re-armed",
                 pool.limit);
            arm_srq_limit(pool); // one shot: arm it again for the next time
        } else {
            info("async event: %s", async_event_name(ev.event_type));
        }
    });
    //! [async]
}

} // namespace rdma_srq
