/**
 * @file talk.hpp
 * @brief rdma_event_loop's client: its side of the conversation (its QP, CQ, channels, its one buffer
 * of slots, its credits) and its two posts, a receive for an echo and a SEND of a message.
 * client.cpp connects, sends and checks the echoes.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/memory.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rdma_event_loop {

inline constexpr std::size_t slot_size =
    2 * rdma_samples::max_message_length; // room for "TEXT #i" and a server that sends more

/** The client's side of the conversation: its objects, its credits, what it has sent and got back. */
struct Talk {
    ibv_qp *qp;
    ibv_cq *cq;
    ibv_comp_channel *channel;
    rdma_event_channel *cm;
    const rdma_samples::Buffer &buf;
    const ibv_mr *mr;
    int window = 0; // messages we may have out: the credits the server granted
    std::vector<std::string> sent = {};
    int echoes = 0, recvs_posted = 0, sends_busy = 0;
    int timeout_s = 0;
};

/** The bytes of slot @p slot of our one buffer, @p len of them, as a scatter/gather entry. */
inline ibv_sge slot_sge(const Talk &talk, int slot, std::uint32_t len)
{
    return {reinterpret_cast<std::uintptr_t>(talk.buf.data() + static_cast<std::size_t>(slot) * slot_size), len,
            talk.mr->lkey};
}

/** Post a receive into slot @p slot: room for one echo. */
inline void post_receive(Talk &talk, int slot)
{
    ibv_sge sge = slot_sge(talk, slot, slot_size);
    ibv_recv_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    rdma_samples::check_post(ibv_post_recv(talk.qp, &wr, &bad), "ibv_post_recv");
    ++talk.recvs_posted;
}

/** SEND the @p len bytes of slot @p slot: one message, one of our credits. */
inline void post_send(Talk &talk, int slot, std::uint32_t len)
{
    ibv_sge sge = slot_sge(talk, slot, len);
    ibv_send_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(slot);
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    rdma_samples::check_post(ibv_post_send(talk.qp, &wr, &bad), "ibv_post_send");
    ++talk.sends_busy;
}

} // namespace rdma_event_loop
