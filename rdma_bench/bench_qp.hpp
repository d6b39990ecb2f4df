/**
 * @file bench_qp.hpp
 * @brief The queue pair of rdma_bench (its depth, selective signaling and inline size are knobs), the
 * work request of --op it carries, and the receives posted on it. Both sides use these.
 *
 * rdma_write/requester.cpp explains every field of ibv_qp_init_attr; here only three change, and they
 * are the ones that matter for speed.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/doca.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/verbs.hpp>

#include <arpa/inet.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

namespace rdma_bench {

/** @brief The send_ops_flags bit of the knobs' operation, for an extended QP (--api extended).
 *  @param opt the knobs @return e.g. IBV_QP_EX_WITH_RDMA_WRITE */
inline std::uint64_t send_ops_flag(const Options &opt)
{
    switch (opt.op) {
    case Op::write: return IBV_QP_EX_WITH_RDMA_WRITE;
    case Op::write_imm: return IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    case Op::send: return IBV_QP_EX_WITH_SEND;
    case Op::read: return IBV_QP_EX_WITH_RDMA_READ;
    case Op::atomic: return opt.cas ? IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP : IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    }
    return 0;
}

namespace detail {
inline ibv_qp *try_create_qp(ibv_pd *pd, ibv_cq *cq, const Options &opt, std::uint32_t inline_size)
{
    //! [create_qp]
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    // Selective signaling: with sq_sig_all = 0 a send asks for a completion only when it carries
    // IBV_SEND_SIGNALED (every --cq-mod-th). Fewer completions: fewer CQ entries written by the device,
    // fewer polled by us.
    init.sq_sig_all = 0;
    // Queue depth: how many send work requests may be outstanding at once (--tx-depth). One at a time,
    // the wire idles while each request's acknowledgement travels back; a deep queue keeps it busy.
    init.cap.max_send_wr = opt.tx_depth;
    init.cap.max_recv_wr = opt.rx_depth + 2; // + the descriptor and the goodbye
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    // Inline data: a send of at most max_inline_data bytes may carry IBV_SEND_INLINE; the CPU then
    // copies the bytes into the work request itself, and the device need not fetch them from memory
    // with a second DMA read. It saves a round trip over PCIe for small messages; the limit is the
    // device's, and asking for more makes ibv_create_qp() fail.
    init.cap.max_inline_data = inline_size;
    if (!opt.extended)
        return ibv_create_qp(pd, &init);
    //! [create_qp]
    //! [create_qp_ex]
    // --api extended: the same QP, told which operation it will post with ibv_wr_*() (chapter 21). The
    // descriptor and the goodbye still go through ibv_post_send(), outside any ibv_wr_start() batch.
    ibv_qp_init_attr_ex ex{};
    ex.send_cq = init.send_cq;
    ex.recv_cq = init.recv_cq;
    ex.qp_type = init.qp_type;
    ex.sq_sig_all = init.sq_sig_all;
    ex.cap = init.cap;
    ex.pd = pd;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.send_ops_flags = send_ops_flag(opt) | IBV_QP_EX_WITH_SEND; // (a ping-pong's answer may be a SEND)
    return ibv_create_qp_ex(pd->context, &ex);
    //! [create_qp_ex]
}
} // namespace detail

/**
 * @brief ibv_create_qp() with the knobs; a --inline-size above the device's limit is a KnobError that
 * names the limit (found by trying smaller sizes).
 * @param pd,cq the protection domain and the completion queue for both directions
 * @param opt   the knobs
 * @return the QP, in RESET
 */
inline rdma_samples::QpPtr create_bench_qp(ibv_pd *pd, ibv_cq *cq, const Options &opt)
{
    const auto want = static_cast<std::uint32_t>(opt.inline_size);
    if (ibv_qp *qp = detail::try_create_qp(pd, cq, opt, want))
        return rdma_samples::QpPtr(qp);
    const int err = errno;
    std::uint32_t lo = 0, hi = want; // lo works (if anything does), hi does not
    if (want == 0)
        rdma_samples::fail_errno(std::string(opt.extended ? "ibv_create_qp_ex" : "ibv_create_qp") + "(RC, send_wr " +
                                     std::to_string(opt.tx_depth) + ")",
                                 err);
    if (ibv_qp *qp = detail::try_create_qp(pd, cq, opt, 0))
        ibv_destroy_qp(qp);
    else
        rdma_samples::fail_errno(std::string(opt.extended ? "ibv_create_qp_ex" : "ibv_create_qp") + "(RC, send_wr " +
                                     std::to_string(opt.tx_depth) + ")",
                                 err);
    while (hi - lo > 1) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        if (ibv_qp *qp = detail::try_create_qp(pd, cq, opt, mid)) {
            ibv_destroy_qp(qp);
            lo = mid;
        } else {
            hi = mid;
        }
    }
    throw KnobError("--inline-size " + std::to_string(want) + ": above the device's limit of " + std::to_string(lo) +
                        " bytes inline (ibv_create_qp refused max_inline_data " + std::to_string(want) + ")",
                    "give --inline-size " + std::to_string(lo) + " or less");
}

/**
 * @brief The -q queue pairs, all on one CQ, moved to INIT (each QPN printed): create_bench_qp() -q times. More than the
 * device's max_qp is a KnobError that names the limit.
 * @param dev           the device (its max_qp)
 * @param pd,cq         the protection domain and the completion queue they all share
 * @param opt           the knobs
 * @param remote_access what the peer may do in our memory (qp_to_init())
 * @return the QPs, in INIT
 */
inline std::vector<rdma_samples::QpPtr> create_bench_qps(const rdma_samples::Device &dev, ibv_pd *pd, ibv_cq *cq,
                                                         const Options &opt, int remote_access)
{
    if (opt.qps > static_cast<std::uint32_t>(dev.device_attr.max_qp))
        throw KnobError("--qps " + std::to_string(opt.qps) + ": more than the " +
                            std::to_string(dev.device_attr.max_qp) + " queue pairs device " + dev.name +
                            " allows (max_qp)",
                        "give -q " + std::to_string(dev.device_attr.max_qp) + " or less");
    std::vector<rdma_samples::QpPtr> qps;
    for (std::uint32_t i = 0; i < opt.qps; ++i) {
        qps.push_back(create_bench_qp(pd, cq, opt));
        rdma_samples::qp_to_init(qps.back().get(), dev, remote_access);
        rdma_samples::info("QPN 0x%06x, state INIT", qps.back()->qp_num);
    }
    return qps;
}

/** @brief Entries of the one CQ: every completion that can be outstanding, on every QP (sends, the
 *  receives posted ahead, the descriptor's and the goodbye's). @param opt the knobs @return them */
inline int cq_depth(const Options &opt)
{
    return static_cast<int>(opt.qps * (opt.tx_depth + opt.rx_depth + 4));
}

/** @brief The immediate value every WRITE with immediate carries, in both directions: DOCA's. */
using rdma_samples::doca::immediate;

/**
 * @brief The work request of @p op toward the peer's memory, filled once: the loops change only wr_id,
 * send_flags and next. The responder answers a ping-pong with the same operation.
 * @param op          the operation (--op)
 * @param cas         with Op::atomic: compare-and-swap instead of fetch-and-add (--atomic cas)
 * @param remote_addr where it goes: in the responder's exported buffer, or the requester's landing region
 * @param rkey        that memory's remote key
 * @return the work request, without its scatter/gather list
 */
inline ibv_send_wr operation_wr(Op op, bool cas, std::uint64_t remote_addr, std::uint32_t rkey)
{
    ibv_send_wr wr{};
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    switch (op) {
    case Op::write: wr.opcode = IBV_WR_RDMA_WRITE; break;
    case Op::write_imm:
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htonl(immediate);
        break;
    case Op::send: wr.opcode = IBV_WR_SEND; break;
    case Op::read: wr.opcode = IBV_WR_RDMA_READ; break;
    case Op::atomic:
        wr.opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = remote_addr; // (a union with wr.rdma: set after it)
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 1; // the add; for a compare-and-swap, post_chain() sets both values
        break;
    }
    return wr;
}

/** @brief The opcode of the completion of the knobs' work request. @param opt the knobs @return it */
inline ibv_wc_opcode sent_opcode(const Options &opt)
{
    switch (opt.op) {
    case Op::read: return IBV_WC_RDMA_READ;
    case Op::send: return IBV_WC_SEND;
    case Op::atomic: return opt.cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD;
    default: return IBV_WC_RDMA_WRITE; // WRITE and WRITE with immediate
    }
}

/** @brief The wr_id of every receive of the measurement: never a send's running number (SendQueue). */
inline constexpr std::uint64_t recv_wr_id = UINT64_MAX;

/**
 * @brief Post @p count receives for messages of up to @p len bytes at @p addr, chained, with one call.
 * @param qp the QP @param count how many @param addr,len,lkey where the messages land (all in one place)
 */
inline void post_receives(ibv_qp *qp, std::uint32_t count, std::uint64_t addr, std::uint32_t len, std::uint32_t lkey)
{
    if (count == 0)
        return;
    ibv_sge sge{addr, len, lkey};
    ibv_recv_wr one{};
    std::vector<ibv_recv_wr> many(count > 1 ? count : 0); // (the common case, one receive, needs no malloc)
    ibv_recv_wr *wr = count > 1 ? many.data() : &one;
    for (std::uint32_t i = 0; i < count; ++i) {
        wr[i].wr_id = recv_wr_id;
        wr[i].sg_list = &sge;
        wr[i].num_sge = 1;
        wr[i].next = i + 1 < count ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr *bad = nullptr;
    if (const int rc = ibv_post_recv(qp, wr, &bad); rc != 0) // no std::string per post on the fast path
        rdma_samples::check_post(rc, "ibv_post_recv(" + std::to_string(count) + " receives)");
}

} // namespace rdma_bench
