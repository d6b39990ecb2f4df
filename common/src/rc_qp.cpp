/** @file rc_qp.cpp @brief RC queue pairs: creation, the walk INIT -> RTR -> RTS -> ERR, MTU and PSN, the connection descriptor. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/text.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

namespace rdma_samples {

QpPtr create_rc_qp(ibv_pd *pd, ibv_cq *cq, QpCaps caps, ibv_srq *srq)
{
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.srq = srq; // given: the QP takes its receives from the SRQ and has no receive queue of its own
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0; // a send request completes only when posted with IBV_SEND_SIGNALED
    init.cap.max_send_wr = caps.max_send_wr;
    init.cap.max_recv_wr = srq ? 0 : caps.max_recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    return QpPtr(
        check(ibv_create_qp(pd, &init), "ibv_create_qp(RC, send_wr " + std::to_string(caps.max_send_wr) +
                                            (srq ? ", SRQ)" : ", recv_wr " + std::to_string(caps.max_recv_wr) + ")")));
}

QpPtr create_ud_qp(ibv_pd *pd, ibv_cq *cq, const Device &dev, QpCaps caps, std::uint32_t qkey,
                   std::uint32_t create_flags)
{
    ibv_qp_init_attr_ex init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_UD;
    init.cap.max_send_wr = caps.max_send_wr;
    init.cap.max_recv_wr = caps.max_recv_wr;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | (create_flags != 0 ? IBV_QP_INIT_ATTR_CREATE_FLAGS : 0);
    init.pd = pd;
    init.create_flags = create_flags;
    QpPtr qp(ibv_create_qp_ex(pd->context, &init));
    if (!qp && create_flags != 0)
        fail_errno("ibv_create_qp_ex(UD, create_flags " + hex(create_flags) + ")", errno,
                   "the device refuses these QP create flags (rxe takes none); create the QP without them");
    if (!qp)
        fail_errno("ibv_create_qp(UD)", errno);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = dev.port;
    attr.qkey = qkey;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
             "ibv_modify_qp(INIT)");
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE), "ibv_modify_qp(RTR)");
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = random_psn();
    check_rc(ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
    return qp;
}

void qp_to_init(ibv_qp *qp, const Device &dev, int remote_access)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = dev.port;
    attr.qp_access_flags = static_cast<unsigned>(remote_access);
    check_rc(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
             "ibv_modify_qp(INIT)");
}

void qp_to_rtr(ibv_qp *qp, const Device &dev, const ConnectionDescriptor &remote, int max_dest_rd_atomic)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = path_mtu(dev, remote.mtu);
    attr.dest_qp_num = remote.qp_num;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = static_cast<std::uint8_t>(max_dest_rd_atomic);
    attr.min_rnr_timer = rc_min_rnr_timer; // 0.64 ms before the peer retries a send we had no receive for
    attr.ah_attr.dlid = remote.lid;
    attr.ah_attr.port_num = dev.port;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = remote.gid;
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(dev.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
    check_rc(ibv_modify_qp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
             "ibv_modify_qp(RTR)");
}

void qp_to_rts(ibv_qp *qp, std::uint32_t psn, int max_rd_atomic)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = psn;
    attr.timeout = rc_timeout;
    attr.retry_cnt = rc_retry_cnt;
    attr.rnr_retry = rc_rnr_retry;
    attr.max_rd_atomic = static_cast<std::uint8_t>(max_rd_atomic);
    check_rc(ibv_modify_qp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_MAX_QP_RD_ATOMIC),
             "ibv_modify_qp(RTS)");
    trace_qp_timers(qp);
}

void qp_to_error(ibv_qp *qp)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    check_rc(ibv_modify_qp(qp, &attr, IBV_QP_STATE), "ibv_modify_qp(ERR)");
}

void trace_qp_timers(ibv_qp *qp)
{
    if (!verbose())
        return;
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    check_rc(ibv_query_qp(qp, &attr,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
                              IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MTU,
                          &init),
             "ibv_query_qp");
    trace("QP 0x%06x: timeout %u, retry_cnt %u, rnr_retry %u, min_rnr_timer %u, max_rd_atomic %u, "
          "max_dest_rd_atomic %u, path_mtu %d",
          qp->qp_num, attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.min_rnr_timer, attr.max_rd_atomic,
          attr.max_dest_rd_atomic, mtu_bytes(attr.path_mtu));
}

int retransmit_window_ms(ibv_qp *qp)
{
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    check_rc(ibv_query_qp(qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &init), "ibv_query_qp(TIMEOUT, RETRY_CNT)");
    // IBTA: the local ACK timeout is 4.096 us x 2^timeout (0 = none); a request goes out 1 + retry_cnt times.
    const double sends = attr.retry_cnt + 1.0;
    const double window_ms = sends * 4.096e-3 * std::ldexp(1.0, attr.timeout);
    const int linger_ms = static_cast<int>(std::ceil(window_ms / 100.0)) * 100;
    trace("retransmit window of QP 0x%06x: (retry_cnt %u + 1) x 4.096 us x 2^%u = %.0f ms, rounded up to %d ms",
          qp->qp_num, attr.retry_cnt, attr.timeout, window_ms, linger_ms);
    if (attr.timeout == 0)
        info("the QP's ACK timeout is 0 (a sender waits for an ACK forever): no linger is long enough");
    // For the test suites, never set in normal use (test_control.hpp): on one Soft-RoCE device no ACK
    // is ever lost, so the loopback tests need no linger; the tests of lossy links (two_host) and of the
    // linger itself run without it.
    if (const int test_ms = test_control_int(TestHook::linger_ms, -1); test_ms >= 0) {
        info("linger shortened for a test: %d ms instead of %d (%s)", test_ms, linger_ms,
             test_control_name(TestHook::linger_ms));
        return test_ms;
    }
    return linger_ms;
}

int mtu_bytes(ibv_mtu mtu)
{
    return 128 << static_cast<int>(mtu);
}

ibv_mtu path_mtu(const Device &dev, int peer_mtu_bytes)
{
    ibv_mtu mtu = dev.port_attr.active_mtu;
    while (mtu > IBV_MTU_256 && mtu_bytes(mtu) > peer_mtu_bytes)
        mtu = static_cast<ibv_mtu>(static_cast<int>(mtu) - 1);
    return mtu;
}

std::uint32_t random_psn()
{
    std::random_device rd;
    return rd() & 0xffffff;
}

ConnectionDescriptor describe_qp(const ibv_qp *qp, const Device &dev, std::uint32_t psn, std::uint64_t nonce)
{
    ConnectionDescriptor d;
    d.nonce = nonce;
    d.qp_num = qp->qp_num;
    d.psn = psn;
    d.lid = dev.port_attr.lid;
    d.gid = dev.gid;
    d.mtu = mtu_bytes(dev.port_attr.active_mtu);
    return d;
}

} // namespace rdma_samples
