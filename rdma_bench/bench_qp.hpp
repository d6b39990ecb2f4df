/**
 * @file bench_qp.hpp
 * @brief The queue pair of rdma_bench: its depth, selective signaling and inline size are knobs.
 *
 * rdma_write/requester.cpp explains every field of ibv_qp_init_attr; here only three change, and they
 * are the ones that matter for speed.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/verbs.hpp>

#include <cerrno>
#include <string>
#include <vector>

namespace rdma_bench {

namespace detail {
inline ibv_qp *try_create_qp(ibv_pd *pd, ibv_cq *cq, const Options &o, std::uint32_t inline_size)
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
    init.cap.max_send_wr = o.tx_depth;
    init.cap.max_recv_wr = o.rx_depth + 2; // + the descriptor and the goodbye
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    // Inline data: a send of at most max_inline_data bytes may carry IBV_SEND_INLINE; the CPU then
    // copies the bytes into the work request itself, and the device need not fetch them from memory
    // with a second DMA read. It saves a round trip over PCIe for small messages; the limit is the
    // device's, and asking for more makes ibv_create_qp() fail.
    init.cap.max_inline_data = inline_size;
    return ibv_create_qp(pd, &init);
    //! [create_qp]
}
} // namespace detail

/**
 * @brief ibv_create_qp() with the knobs; a --inline-size above the device's limit is a KnobError that
 * names the limit (found by trying smaller sizes).
 * @param pd,cq the protection domain and the completion queue for both directions
 * @param o     the knobs
 * @return the QP, in RESET
 */
inline rdma_samples::QpPtr create_bench_qp(ibv_pd *pd, ibv_cq *cq, const Options &o)
{
    const auto want = static_cast<std::uint32_t>(o.inline_size);
    if (ibv_qp *qp = detail::try_create_qp(pd, cq, o, want))
        return rdma_samples::QpPtr(qp);
    const int err = errno;
    std::uint32_t lo = 0, hi = want; // lo works (if anything does), hi does not
    if (want == 0)
        rdma_samples::fail_errno("ibv_create_qp(RC, send_wr " + std::to_string(o.tx_depth) + ")", err);
    if (ibv_qp *qp = detail::try_create_qp(pd, cq, o, 0))
        ibv_destroy_qp(qp);
    else
        rdma_samples::fail_errno("ibv_create_qp(RC, send_wr " + std::to_string(o.tx_depth) + ")", err);
    while (hi - lo > 1) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        if (ibv_qp *qp = detail::try_create_qp(pd, cq, o, mid)) {
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
 * @brief The -q queue pairs, all on one CQ, moved to INIT: create_bench_qp() -q times. More than the
 * device's max_qp is a KnobError that names the limit.
 * @param dev           the device (its max_qp)
 * @param pd,cq         the protection domain and the completion queue they all share
 * @param o             the knobs
 * @param remote_access what the peer may do in our memory (qp_to_init())
 * @return the QPs, in INIT
 */
inline std::vector<rdma_samples::QpPtr> create_bench_qps(const rdma_samples::Device &dev, ibv_pd *pd, ibv_cq *cq,
                                                         const Options &o, int remote_access)
{
    if (o.qps > static_cast<std::uint32_t>(dev.device_attr.max_qp))
        throw KnobError("--qps " + std::to_string(o.qps) + ": more than the " + std::to_string(dev.device_attr.max_qp) +
                            " queue pairs device " + dev.name + " allows (max_qp)",
                        "give -q " + std::to_string(dev.device_attr.max_qp) + " or less");
    std::vector<rdma_samples::QpPtr> qps;
    for (std::uint32_t i = 0; i < o.qps; ++i) {
        qps.push_back(create_bench_qp(pd, cq, o));
        rdma_samples::qp_to_init(qps.back().get(), dev, remote_access);
    }
    return qps;
}

/** @brief The QPs of step 3, as the output names them. @param o the knobs
 *  @return "a QP", or e.g. "4 QPs on it" (-q 4: they share the CQ) */
inline std::string qps_text(const Options &o)
{
    return o.qps == 1 ? std::string("a QP") : std::to_string(o.qps) + " QPs on it";
}

/**
 * @brief The flags of QP @p i's exchange. With -q 1 they are the ones given; with more, each QP
 * exchanges its own connection descriptors through numbered files (`<-ld>-0000`, `<-re>-0001`, ...),
 * as rdma_multi_conn's connections do, and with `-cm` QP i connects on port `-lp` + i: a listener of
 * its own, so no QP's connection request can reach the listener of another (the server would have to
 * reject it). The resource descriptor (-m) is QP 0's alone.
 * @param args the flags given
 * @param i    the QP's index
 * @param qps  how many QPs (-q)
 * @return the flags for QP @p i
 * @throws KnobError when `-lp` + i is beyond the last port, 65535
 */
inline rdma_samples::Args args_for_qp(const rdma_samples::Args &args, std::uint32_t i, std::uint32_t qps)
{
    rdma_samples::Args one = args;
    if (qps == 1)
        return one;
    one.local_descriptor_path = rdma_samples::numbered_path(args.local_descriptor_path, static_cast<int>(i));
    one.remote_descriptor_path = rdma_samples::numbered_path(args.remote_descriptor_path, static_cast<int>(i));
    const std::uint32_t port = args.listen_port + i;
    if (args.use_cm && port > 65535)
        throw KnobError("-lp " + std::to_string(args.listen_port) + " with -q " + std::to_string(qps) + ": QP " +
                            std::to_string(i) + " would listen on port " + std::to_string(port) + ", beyond 65535",
                        "give -lp " + std::to_string(65536 - qps) + " or less on both sides");
    one.listen_port = static_cast<std::uint16_t>(port);
    return one;
}

} // namespace rdma_bench
