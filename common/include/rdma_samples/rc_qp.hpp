/**
 * @file rc_qp.hpp
 * @brief Create a Reliable Connected queue pair and move it INIT -> RTR -> RTS.
 *
 * rdma_write/requester.cpp writes these transitions out in full, with a comment on every attribute;
 * the later lessons call these helpers instead. Read that lesson first.
 */
#pragma once

#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/verbs.hpp>

#include <algorithm>
#include <cstdint>

namespace rdma_samples {

/**
 * @brief Transport retries (IBV_QP_RETRY_CNT): how often an unacknowledged packet is sent again before
 * the request fails with IBV_WC_RETRY_EXC_ERR.
 *
 * The IBTA defines a plain 3-bit count: 7 is seven retries. Only rnr_retry gives 7 the meaning
 * "forever". Soft-RoCE differs: rdma_rxe treats retry_cnt 7 as "forever" too (rxe_comp.c), so against
 * a dead peer it would never complete. 6 ends in an error everywhere.
 */
inline constexpr int rc_retry_cnt = 6;
/** @brief RNR retries (IBV_QP_RNR_RETRY): 7 means "retry forever" (IBTA), so a peer that never posts
 *  its receive would hang us; 6 ends a missing receive in IBV_WC_RNR_RETRY_EXC_ERR. */
inline constexpr int rc_rnr_retry = 6;
/**
 * @brief Local ACK timeout exponent (IBV_QP_TIMEOUT): 4.096 us * 2^14 = 67 ms per try (IBTA).
 *
 * With rc_retry_cnt 6 a request is sent at most 7 times. Soft-RoCE honours the value exactly:
 * `./lab trace write --kill-responder` shows the seven sends 67 ms apart, then IBV_WC_RETRY_EXC_ERR.
 * A NIC need not: it may round a small timeout up to a minimum of its own, and ConnectX's adaptive
 * retransmission chooses its own, growing and randomised, intervals within firmware limits, so neither
 * the spacing nor the time to the error is a promise on hardware.
 */
inline constexpr int rc_timeout = 14;

/**
 * @brief How long a sender whose QP has @p qp's ACK timeout and retry count may keep resending one
 * request, in the IBTA's worst case: (retry_cnt + 1) x 4.096 us x 2^timeout, rounded up to a tenth of
 * a second (500 ms for timeout 14 and retry_cnt 6). Asks the QP (ibv_query_qp()).
 *
 * The side that RECEIVES the last message of a connection keeps its QP this long before destroying it,
 * like TCP's TIME_WAIT: if its ACK of that message is lost, the sender resends, and only a QP that
 * still exists can acknowledge again. The sender's timers count, not ours; the samples give both sides
 * the same (rc_timeout, rc_retry_cnt, with or without -cm), so our own QP tells us the sender's.
 *
 * This is a best effort, not a guarantee: a NIC that rounds the timeout up or retransmits adaptively
 * (ConnectX) may resend later than the IBTA formula says, and `timeout` 0 means "wait forever". The
 * robust ways to end a connection are an application-level acknowledgement of the goodbye (the
 * receiver answers it; the sender destroys its QP only after the answer) or RDMA CM's DREQ/DREP, where
 * the sender answers the DREQ only after its last completion (what `-cm` does).
 * @param qp the QP that received the last message, at RTS or later
 * @return milliseconds to keep it
 */
int retransmit_window_ms(ibv_qp *qp);

/** @brief RNR NAK timer (IBV_QP_MIN_RNR_TIMER) we ask a sender to wait before it retries a SEND that
 *  found no receive: code 12 = 0.64 ms (IBTA table of RNR timer codes; code 0 means 655 ms). */
inline constexpr int rc_min_rnr_timer = 12;

/** @brief Queue sizes of a QP. */
struct QpCaps {
    std::uint32_t max_send_wr = 16; ///< send queue depth
    std::uint32_t max_recv_wr = 16; ///< receive queue depth
};

/**
 * @brief How many entries a CQ needs for one QP of these sizes: every send request and every receive
 * that can be outstanding at once may complete into it before anybody polls.
 *
 * The rule: a CQ's entries >= the send WRs + the receive WRs that can be outstanding on every QP that
 * completes into it. Every send WR counts, signaled or not: an unsignaled request that fails, or is
 * flushed when the QP enters the error state, completes with its error status all the same (IBTA
 * vol. 1, 10.7.3.1; rxe_comp.c posts a CQE for every WR whose status is not success). Size a CQ by the
 * signaled requests alone (depth / N with selective signaling) and the first QP error overruns it:
 * IBV_EVENT_CQ_ERR, which hides the error that started it. tests/device/cq_flush.cpp shows both.
 * @param caps the QP's queue sizes
 * @return the number of CQ entries to ask ibv_create_cq() for
 */
constexpr int cq_entries(QpCaps caps)
{
    return static_cast<int>(caps.max_send_wr + caps.max_recv_wr);
}

/**
 * @brief ibv_create_qp() for an RC QP whose send and receive completions both go to @p cq.
 *
 * `sq_sig_all = 0`: a send request completes into the CQ only when it is posted with
 * IBV_SEND_SIGNALED. The samples signal every request they wait for; a fast program signals one in N
 * (at least one in every max_send_wr, or the send queue never frees).
 * @param pd   protection domain
 * @param cq   completion queue
 * @param caps queue depths (max_recv_wr is ignored with an SRQ)
 * @param srq  a shared receive queue to take receives from (ibv_qp_init_attr.srq), or nullptr for a
 *             receive queue of the QP's own
 * @return the new QP, in state RESET
 */
QpPtr create_rc_qp(ibv_pd *pd, ibv_cq *cq, QpCaps caps = {}, ibv_srq *srq = nullptr);

/**
 * @brief A UD queue pair taken to RTS: created, then INIT (the port, partition 0 and @p qkey: only
 * datagrams that carry it reach the QP), RTR (nothing to learn: a UD QP has no peer) and RTS (a first
 * PSN nobody checks). Chapter 12 writes these calls out (rdma_ud/sender.cpp); rdma_multicast uses this.
 * @param pd   the protection domain
 * @param cq   the CQ of both queues
 * @param dev  the device (its port)
 * @param caps queue sizes
 * @param qkey the Q_Key the QP accepts
 * @param create_flags ibv_qp_create_flags for ibv_create_qp_ex() (e.g. IBV_QP_CREATE_BLOCK_SELF_MCAST_LB),
 *        or 0
 * @return the new QP, in state RTS
 */
QpPtr create_ud_qp(ibv_pd *pd, ibv_cq *cq, const Device &dev, QpCaps caps, std::uint32_t qkey,
                   std::uint32_t create_flags = 0);

/**
 * @brief RESET -> INIT: bind the QP to a port and say what the PEER may do to our memory through it.
 * @param qp           the queue pair
 * @param dev          the device (its port)
 * @param remote_access IBV_ACCESS_REMOTE_* flags the peer may use (0 for a QP that only initiates)
 */
void qp_to_init(ibv_qp *qp, const Device &dev, int remote_access);

/**
 * @brief INIT -> RTR: learn the peer (QPN, PSN, GID); from now on the QP accepts its packets.
 * @param qp               the queue pair
 * @param dev              the device (port, GID index)
 * @param remote           the peer's connection descriptor
 * @param max_dest_rd_atomic READs/atomics the peer may have outstanding at us (0 if none)
 */
void qp_to_rtr(ibv_qp *qp, const Device &dev, const ConnectionDescriptor &remote, int max_dest_rd_atomic = 0);

/**
 * @brief How many READs and atomics may be in flight on one QP, as rdma_read (chapter 3) writes it
 * out: the device's limit, at most @p cap, at least 1 (with 0, none could be posted or accepted).
 * @param device_limit max_qp_init_rd_atom for our own (initiator depth, max_rd_atomic), or
 *                     max_qp_rd_atom for the peer's at us (responder resources, max_dest_rd_atomic)
 * @param cap          the most this program needs
 * @return the depth
 */
inline int rd_atomic_depth(int device_limit, int cap = 16)
{
    return std::max(1, std::min(device_limit, cap));
}

/**
 * @brief RTR -> RTS: the QP may now send.
 * @param qp         the queue pair
 * @param psn        the first PSN this side sends (the one published in our descriptor)
 * @param max_rd_atomic READs/atomics we may have outstanding at the peer (0 if none)
 */
void qp_to_rts(ibv_qp *qp, std::uint32_t psn, int max_rd_atomic = 0);

/**
 * @brief Any state -> ERR: the QP stops, and every work request still posted on it completes with
 * IBV_WC_WR_FLUSH_ERR.
 * @param qp the queue pair
 */
void qp_to_error(ibv_qp *qp);

/**
 * @brief With -v, print the timers and depths the QP really holds (ibv_query_qp()): ACK timeout,
 * retry counts, RNR timer, READ/atomic depths, path MTU. Both flows print the same line.
 * @param qp the queue pair, at RTS
 */
void trace_qp_timers(ibv_qp *qp);

/**
 * @brief The path MTU both sides can use: the smaller of ours and the peer's, as an enum.
 * @param dev           our device (its active MTU)
 * @param peer_mtu_bytes the MTU in the peer's descriptor
 * @return the smaller of the two
 */
ibv_mtu path_mtu(const Device &dev, int peer_mtu_bytes);

/**
 * @brief 256..4096 bytes for an ibv_mtu value.
 * @param mtu the enum value
 * @return bytes
 */
int mtu_bytes(ibv_mtu mtu);

/** @brief A random 24-bit packet sequence number.
 *  @return the PSN */
std::uint32_t random_psn();

/**
 * @brief Our connection descriptor: how the peer reaches @p qp.
 * @param qp    our queue pair
 * @param dev   our device (LID, GID, active MTU)
 * @param psn   our first PSN
 * @param nonce our fresh nonce
 * @return the descriptor to publish
 */
ConnectionDescriptor describe_qp(const ibv_qp *qp, const Device &dev, std::uint32_t psn, std::uint64_t nonce);

} // namespace rdma_samples
