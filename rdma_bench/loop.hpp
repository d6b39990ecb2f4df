/**
 * @file loop.hpp
 * @brief What the measuring loops of both sides share: the state they touch, posting a chain of work
 * requests, and taking completions in batches. The chapter quotes post_chain and the replacing of
 * receives.
 *
 * The requester's loops (requester.cpp) post the operation; the responder's (responder.cpp) answer a
 * ping-pong with the same operation and take the requester's messages. Both post and poll the same way.
 */
#pragma once

#include "bench_qp.hpp"
#include "cq_wait.hpp"
#include "support/options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/text.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace rdma_bench {

/** @brief The byte ping number @p ping of a WRITE ping-pong ends with: never 0, never the previous one.
 *  @param ping the ping's number @return the byte */
inline char ping_tag(std::uint64_t ping)
{
    return static_cast<char>(ping % 250 + 1);
}

/**
 * @brief One queue pair of the measurement and its own slice of memory on each side. With -q N
 * (perftest's -q) there are N: each carries --iters messages, all share one CQ, and their completions
 * are told apart by the QP number each one names (ibv_wc::qp_num).
 */
struct Lane {
    /**
     * @param knobs  the knobs
     * @param our_qp the QP, at RTS
     * @param op_wr  the operation toward this QP's slice of the peer's memory (operation_wr())
     * @param source what it sends (WRITE, SEND), or where its answer lands (READ, atomic)
     * @param land   where the peer's WRITEs and messages for this QP land
     * @param lkey   our memory region's lkey
     */
    Lane(const Options &knobs, ibv_qp *our_qp, const ibv_send_wr &op_wr, char *source, char *land, std::uint32_t lkey)
        : qp(our_qp), sq{0, 0, knobs.tx_depth, knobs.cq_mod},
          wr(op_wr), sge{reinterpret_cast<std::uintptr_t>(source), 0, lkey}, buf(source), landing(land)
    {
        wr.num_sge = 1; // (sg_list is set as each request is posted: a Lane may move in its vector)
    }

    ibv_qp *qp;                   ///< the QP
    ibv_qp_ex *qpx = nullptr;     ///< the same QP seen through ibv_wr_*(), with --api extended
    SendQueue sq;                 ///< its send queue's slots under selective signaling
    ibv_send_wr wr;               ///< the operation; only wr_id, send_flags and next change
    ibv_sge sge;                  ///< its one scatter/gather element; only the length changes
    char *buf;                    ///< where the sge points
    char *landing;                ///< where the peer's data for this QP lands
    std::uint64_t recvs_left = 0; ///< receives still to post: one for each message still to come
    std::uint64_t received = 0;   ///< messages taken (SEND, WRITE with immediate), the goodbye not counted
    bool goodbye = false;         ///< the requester's zero-length SEND has arrived on this QP
};

/** @brief Everything the measuring loops touch, on either side. */
struct Loop {
    /**
     * @param knobs the knobs
     * @param how   how to wait for the completions of every QP (they share the CQ)
     */
    Loop(const Options &knobs, CompletionWaiter how) : opt(knobs), waiter(std::move(how)), chain(knobs.post_list) {}
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;

    /** @brief The QP a completion belongs to. @param wc the completion @return its lane */
    Lane &lane_of(const ibv_wc &wc)
    {
        for (Lane &lane : lanes) // (a handful: -q is at most max_qps)
            if (lane.qp->qp_num == wc.qp_num)
                return lane;
        throw rdma_samples::Error("a completion for QP " + rdma_samples::hex(wc.qp_num) + ", which is none of ours",
                                  "a bug: every QP on this CQ is a lane of the loop");
    }
    /**
     * @brief One lane per QP: QP i on slice i, @p region bytes, of our memory and of the peer's.
     * @param qps    the QPs, at RTS
     * @param peer   the peer's memory: the responder's export, or the requester's landing region
     * @param region the bytes of one slice
     * @param land   slice 0 of where the peer's data lands
     * @param source what every QP sends (the requester's WRITE, SEND: the same bytes), or nullptr: each
     *               QP's own landing slice (a READ's or an atomic's answer lands there; the responder
     *               answers a ping with what arrived)
     * @param lkey   our memory region's lkey
     */
    void add_lanes(const std::vector<rdma_samples::QpPtr> &qps, const rdma_samples::ResourceDescriptor &peer,
                   std::uint32_t region, char *land, char *source, std::uint32_t lkey)
    {
        for (std::size_t i = 0; i < qps.size(); ++i) {
            const std::size_t slice = std::size_t{region} * i;
            lanes.emplace_back(opt, qps[i].get(), operation_wr(opt.op, opt.cas, peer.addr + slice, peer.rkey),
                               source != nullptr ? source : land + slice, land + slice, lkey);
            if (opt.extended)
                lanes.back().qpx = ibv_qp_to_qp_ex(qps[i].get());
        }
    }
    /** @brief Whether request number @p last has completed on every QP. @param last its number
     *  @return true when it has */
    bool all_done(std::uint64_t last) const
    {
        return std::all_of(lanes.begin(), lanes.end(), [&](const Lane &lane) { return lane.sq.done > last; });
    }
    /** @brief Whether the requester's goodbye has arrived on every QP. @return true when it has */
    bool all_goodbyes() const
    {
        return std::all_of(lanes.begin(), lanes.end(), [](const Lane &lane) { return lane.goodbye; });
    }

    const Options &opt;             ///< the knobs
    CompletionWaiter waiter;        ///< busy polling or events, in batches, on the shared CQ
    std::vector<Lane> lanes;        ///< the QPs (-q); latency tests have one
    bool bad_imm = false;           ///< a WRITE with immediate carried another value than #immediate
    std::vector<ibv_send_wr> chain; ///< room for one chain of --post-list requests
};

//! [post_chain_ex]
// --api extended: the same `count` requests as post_chain() below, built by calls on the QP between
// ibv_wr_start() and ibv_wr_complete() (one doorbell for them all): no ibv_send_wr is filled, copied or
// parsed. Each request takes the wr_id and wr_flags the QP holds when its ibv_wr_<opcode>() is called.
inline void post_chain_extended(Lane &lane, std::uint32_t count, std::uint32_t size, bool can_inline,
                                std::uint64_t first, std::uint64_t last)
{
    ibv_qp_ex *qpx = lane.qpx;
    const ibv_send_wr &op = lane.wr; // the operation, its remote address and key (operation_wr())
    ibv_wr_start(qpx);
    for (std::uint32_t k = 0; k < count; ++k) {
        const std::uint64_t number = lane.sq.posted + k;
        qpx->wr_id = number;
        qpx->wr_flags =
            (lane.sq.signaled(number, first, last) ? IBV_SEND_SIGNALED : 0) | (can_inline ? IBV_SEND_INLINE : 0);
        switch (op.opcode) {
        case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(qpx, op.wr.rdma.rkey, op.wr.rdma.remote_addr); break;
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            ibv_wr_rdma_write_imm(qpx, op.wr.rdma.rkey, op.wr.rdma.remote_addr, op.imm_data);
            break;
        case IBV_WR_SEND: ibv_wr_send(qpx); break;
        case IBV_WR_RDMA_READ: ibv_wr_rdma_read(qpx, op.wr.rdma.rkey, op.wr.rdma.remote_addr); break;
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            ibv_wr_atomic_fetch_add(qpx, op.wr.atomic.rkey, op.wr.atomic.remote_addr, op.wr.atomic.compare_add);
            break;
        default: // IBV_WR_ATOMIC_CMP_AND_SWP, as post_chain() does it: N -> N + 1
            ibv_wr_atomic_cmp_swp(qpx, op.wr.atomic.rkey, op.wr.atomic.remote_addr, number, number + 1);
            break;
        }
        if (can_inline)
            ibv_wr_set_inline_data(qpx, lane.buf, size); // the bytes are copied now, as with IBV_SEND_INLINE
        else
            ibv_wr_set_sge(qpx, lane.sge.lkey, lane.sge.addr, size);
    }
    if (const int rc = ibv_wr_complete(qpx); rc != 0) // (none of them was posted)
        rdma_samples::check_post(rc, "ibv_wr_complete(" + std::to_string(count) + " work requests)");
    lane.sq.posted += count;
}
//! [post_chain_ex]

//! [post_chain]
// Post `count` work requests, linked through `next`, with ONE ibv_post_send(): one call, one doorbell (the
// write that tells the device there is work) for the whole chain instead of one per request.
inline void post_chain(Loop &loop, Lane &lane, std::uint32_t count, std::uint32_t size, std::uint64_t first,
                       std::uint64_t last)
{
    ibv_send_wr *wr = loop.chain.data(); // allocated once: no malloc on the fast path
    lane.sge.length = size;
    const bool can_inline = size <= loop.opt.inline_size && lane.wr.opcode != IBV_WR_RDMA_READ &&
                            lane.wr.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD &&
                            lane.wr.opcode != IBV_WR_ATOMIC_CMP_AND_SWP;
    if (lane.qpx != nullptr)
        return post_chain_extended(lane, count, size, can_inline, first, last);
    for (std::uint32_t k = 0; k < count; ++k) {
        const std::uint64_t number = lane.sq.posted + k;
        wr[k] = lane.wr;
        wr[k].sg_list = &lane.sge;
        wr[k].wr_id = number; // its running number on this QP: a completion for it frees every slot up to it
        wr[k].send_flags =
            (lane.sq.signaled(number, first, last) ? IBV_SEND_SIGNALED : 0) | (can_inline ? IBV_SEND_INLINE : 0);
        wr[k].next = k + 1 < count ? &wr[k + 1] : nullptr;
        if (wr[k].opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            // The compare-and-swap number N expects the counter at N and swaps in N + 1, so every one
            // succeeds and the counter ends as fetch-and-add's would (--verify checks it).
            wr[k].wr.atomic.compare_add = number;
            wr[k].wr.atomic.swap = number + 1;
        }
    }
    ibv_send_wr *bad = nullptr;
    // Build the error's text only on an error: a std::string per post (malloc, to_string, free) cost
    // ~800 instructions per operation, more than librxe's whole post (callgrind; chapter 10).
    if (const int rc = ibv_post_send(lane.qp, wr, &bad); rc != 0)
        rdma_samples::check_post(rc, "ibv_post_send(" + std::to_string(count) + " work requests)");
    lane.sq.posted += count;
}
//! [post_chain]

/**
 * @brief Take what the CQ has (one batch): a send's completion frees its slot and those of the
 * unsignaled sends before it on its QP; a message is counted and its receive replaced; a zero-length
 * SEND is the requester's goodbye (chapter 2), the last message of its QP's receive queue.
 * @param loop the loop's state
 * @param what what is awaited, for the timeout message
 * @return how many messages were taken (the goodbye not counted)
 */
inline int take_completions(Loop &loop, const char *what)
{
    int messages = 0;
    const int batch = loop.waiter.wait(what);
    for (int i = 0; i < batch; ++i) {
        const ibv_wc &wc = loop.waiter.wc(i);
        // wr_id, status and qp_num are valid in every completion; the opcode only in a successful one.
        // Build a message only on failure: this is the fast path.
        Lane &lane = loop.lane_of(wc);
        if (wc.wr_id != recv_wr_id) {
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != sent_opcode(loop.opt))
                rdma_samples::check_wc(wc, sent_opcode(loop.opt), op_name(loop.opt.op));
            lane.sq.completed(wc);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || (wc.opcode != IBV_WC_RECV && wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM))
            rdma_samples::check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.opcode == IBV_WC_RECV && wc.byte_len == 0) {
            lane.goodbye = true; // everything the requester sent on this QP before it has arrived
            continue;
        }
        ++lane.received;
        ++messages;
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(wc.imm_data) != immediate)
            loop.bad_imm = true;
        //! [repost]
        // A consumed receive is replaced at once, so the sender never finds the queue empty (RNR).
        if (lane.recvs_left > 0) {
            post_receives(lane.qp, 1, reinterpret_cast<std::uintptr_t>(lane.landing), max_size, lane.sge.lkey);
            --lane.recvs_left;
        }
        //! [repost]
    }
    return messages;
}

} // namespace rdma_bench
