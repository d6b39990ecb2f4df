/**
 * @file loop.hpp
 * @brief What the measuring loops of both sides share: the state they touch, the work request of
 * --op, posting a chain of them, and taking completions in batches. The chapter quotes post_chain and
 * the replacing of receives.
 *
 * The requester's loops (requester.cpp) post the operation; the responder's (responder.cpp) answer a
 * ping-pong with the same operation and take the requester's messages. Both post and poll the same way.
 */
#pragma once

#include "cq_wait.hpp"
#include "options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>

#include <arpa/inet.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rdma_bench {

/** @brief The immediate value every WRITE with immediate carries, in both directions. */
inline constexpr std::uint32_t immediate = 0xABCD;

/** @brief The byte the @p n-th ping of a WRITE ping-pong ends with: never 0, never the previous one.
 *  @param n the ping's number @return the byte */
inline char ping_tag(std::uint64_t n) { return static_cast<char>(n % 250 + 1); }

/**
 * @brief The work request of @p op toward the peer's memory, filled once: the loops change only wr_id,
 * send_flags and next. The responder answers a ping-pong with the same operation.
 * @param op   the operation (--op)
 * @param cas  with Op::atomic: compare-and-swap instead of fetch-and-add (--atomic cas)
 * @param peer where it goes: the responder's exported buffer, or the requester's landing region
 * @return the work request, without its scatter/gather list
 */
inline ibv_send_wr operation_wr(Op op, bool cas, const rdma_samples::ResourceDescriptor &peer)
{
    ibv_send_wr wr{};
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    switch (op) {
    case Op::write: wr.opcode = IBV_WR_RDMA_WRITE; break;
    case Op::write_imm: wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, wr.imm_data = htonl(immediate); break;
    case Op::send: wr.opcode = IBV_WR_SEND; break;
    case Op::read: wr.opcode = IBV_WR_RDMA_READ; break;
    case Op::atomic:
        wr.opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = peer.addr; // (a union with wr.rdma: set after it)
        wr.wr.atomic.rkey = peer.rkey;
        wr.wr.atomic.compare_add = 1; // the add; for a compare-and-swap, post_chain() sets both values
        break;
    }
    return wr;
}

/** @brief The opcode of the completion of the knobs' work request. @param o the knobs @return it */
inline ibv_wc_opcode sent_opcode(const Options &o)
{
    switch (o.op) {
    case Op::read: return IBV_WC_RDMA_READ;
    case Op::send: return IBV_WC_SEND;
    case Op::atomic: return o.cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD;
    default: return IBV_WC_RDMA_WRITE; // WRITE and WRITE with immediate
    }
}

/** @brief Everything the measuring loops touch, on either side. */
struct Loop {
    /**
     * @param knobs  the knobs
     * @param q      the QP, at RTS
     * @param w      how to wait for its completions
     * @param op_wr  the operation (operation_wr())
     * @param source what it sends (WRITE, SEND), or where its answer lands (READ, atomic)
     * @param land   where the peer's WRITEs and messages land
     * @param key    our memory region's lkey
     */
    Loop(const Options &knobs, ibv_qp *q, CompletionWaiter w, const ibv_send_wr &op_wr, char *source, char *land,
         std::uint32_t key)
        : opt(knobs), qp(q), waiter(std::move(w)), sq{0, 0, knobs.tx_depth, knobs.cq_mod}, wr(op_wr),
          sge{reinterpret_cast<std::uintptr_t>(source), 0, key}, buf(source), landing(land), chain(knobs.post_list)
    {
        wr.sg_list = &sge;
        wr.num_sge = 1;
    }
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;

    const Options &opt;           ///< the knobs
    ibv_qp *qp;                   ///< the QP
    CompletionWaiter waiter;      ///< busy polling or events, in batches
    SendQueue sq;                 ///< the send queue's slots under selective signaling
    ibv_send_wr wr;               ///< the operation; only wr_id, send_flags and next change
    ibv_sge sge;                  ///< its one scatter/gather element; only the length changes
    char *buf;                    ///< where the sge points
    char *landing;                ///< where the peer's data lands
    std::uint64_t recvs_left = 0; ///< receives still to post: one for each message still to come
    std::uint64_t received = 0;   ///< messages taken (SEND, WRITE with immediate), the goodbye not counted
    bool goodbye = false;         ///< the requester's zero-length SEND has arrived
    bool bad_imm = false;         ///< a WRITE with immediate carried another value than #immediate
    std::vector<ibv_send_wr> chain; ///< room for one chain of --post-list requests
};

//! [post_chain]
// Post n work requests, linked through `next`, with ONE ibv_post_send(): one call, one doorbell (the
// write that tells the device there is work) for the whole chain instead of one per request.
inline void post_chain(Loop &loop, std::uint32_t n, std::uint32_t size, std::uint64_t first, std::uint64_t last)
{
    ibv_send_wr *wr = loop.chain.data(); // allocated once: no malloc on the fast path
    loop.sge.length = size;
    const bool can_inline = size <= loop.opt.inline_size && loop.wr.opcode != IBV_WR_RDMA_READ &&
                            loop.wr.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD && loop.wr.opcode != IBV_WR_ATOMIC_CMP_AND_SWP;
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint64_t i = loop.sq.posted + k;
        wr[k] = loop.wr;
        wr[k].wr_id = i; // its running number: a completion for it frees every slot up to it
        wr[k].send_flags = (loop.sq.signaled(i, first, last) ? IBV_SEND_SIGNALED : 0) | (can_inline ? IBV_SEND_INLINE : 0);
        wr[k].next = k + 1 < n ? &wr[k + 1] : nullptr;
        if (wr[k].opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            // The i-th compare-and-swap expects the counter at i and swaps in i + 1, so every one
            // succeeds and the counter ends as fetch-and-add's would (--verify checks it).
            wr[k].wr.atomic.compare_add = i;
            wr[k].wr.atomic.swap = i + 1;
        }
    }
    ibv_send_wr *bad = nullptr;
    // Build the error's text only on an error: a std::string per post (malloc, to_string, free) cost
    // ~800 instructions per operation, more than librxe's whole post (callgrind; chapter 10).
    if (const int rc = ibv_post_send(loop.qp, wr, &bad); rc != 0)
        rdma_samples::check_rc(rc, "ibv_post_send(" + std::to_string(n) + " work requests)");
    loop.sq.posted += n;
}
//! [post_chain]

/**
 * @brief Take what the CQ has (one batch): a send's completion frees its slot and those of the
 * unsignaled sends before it; a message is counted and its receive replaced; a zero-length SEND is the
 * requester's goodbye (chapter 2), the last message of the receive queue.
 * @param loop the loop's state
 * @param what what is awaited, for the timeout message
 * @return how many messages were taken (the goodbye not counted)
 */
inline int take_completions(Loop &loop, const char *what)
{
    int got = 0;
    const int n = loop.waiter.wait(what);
    for (int i = 0; i < n; ++i) {
        const ibv_wc &wc = loop.waiter.wc(i);
        // wr_id and status are valid in every completion; the opcode only in a successful one. Build
        // a message only on failure: this is the fast path.
        if (wc.wr_id != recv_wr_id) {
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != sent_opcode(loop.opt))
                rdma_samples::check_wc(wc, sent_opcode(loop.opt), op_name(loop.opt.op));
            loop.sq.completed(wc);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || (wc.opcode != IBV_WC_RECV && wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM))
            rdma_samples::check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.opcode == IBV_WC_RECV && wc.byte_len == 0) {
            loop.goodbye = true; // everything the requester sent before it has arrived
            continue;
        }
        ++loop.received;
        ++got;
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(wc.imm_data) != immediate)
            loop.bad_imm = true;
        //! [repost]
        // A consumed receive is replaced at once, so the sender never finds the queue empty (RNR).
        if (loop.recvs_left > 0) {
            post_receives(loop.qp, 1, reinterpret_cast<std::uintptr_t>(loop.landing), max_size, loop.sge.lkey);
            --loop.recvs_left;
        }
        //! [repost]
    }
    return got;
}

} // namespace rdma_bench
