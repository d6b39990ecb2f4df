/**
 * @file window.hpp
 * @brief What rdma_memory's window pair shares: the region's shape, the wr_ids of its five messages and
 * the two zero-length messages they are made of.
 *
 * The conversation, in order (every message is a zero-length SEND but the descriptor):
 *
 *     requester                          responder
 *     "grant me a window"   ------->     binds a window over part of its region
 *                           <-------     the window's descriptor (addr, length, rkey, access)
 *     RDMA WRITE into the window ---->   (no completion: one-sided)
 *     "done with it"        ------->     checks its memory, revokes the window
 *                           <-------     "revoked"
 *     goodbye               ------->     checks its memory again
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace window {

/** @brief Bytes the responder registers: one page. The window is a part of it. */
inline constexpr std::size_t region_size = 4096;
/** @brief Where the window starts in the region, unless --offset says otherwise. */
inline constexpr std::uint32_t default_offset = 1024;
/** @brief How long the window is, unless --length says otherwise. */
inline constexpr std::uint32_t default_length = 256;

inline constexpr std::uint64_t request_wr_id = 0x61;    ///< the requester's "grant me a window"
inline constexpr std::uint64_t done_wr_id = 0x62;       ///< its "done with the window"
inline constexpr std::uint64_t revoked_wr_id = 0x63;    ///< the responder's "revoked"
inline constexpr std::uint64_t bind_wr_id = 0xb1;       ///< the bind (type 1: ibv_bind_mw; type 2: a work request)
inline constexpr std::uint64_t invalidate_wr_id = 0xb2; ///< type 2's revocation, IBV_WR_LOCAL_INV

/**
 * @brief Post a receive without a scatter/gather list, for a zero-length message (a signal, as the
 * goodbye of chapter 2 is). Receives are consumed in the order they were posted.
 * @param qp    our QP, in INIT or later
 * @param wr_id which message it waits for
 * @param what  the message, for the error
 */
inline void post_empty_receive(ibv_qp *qp, std::uint64_t wr_id, const char *what)
{
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    ibv_recv_wr *bad_wr = nullptr;
    rdma_samples::check_rc(ibv_post_recv(qp, &wr, &bad_wr), what);
}

/**
 * @brief Post a zero-length SEND: a signal that carries no data, only its arrival.
 * @param qp     our QP, at RTS
 * @param wr_id  which message it is
 * @param what   the message, for the error
 * @param invalidate_rkey not 0: a SEND with invalidate (IBV_WR_SEND_WITH_INV), which revokes the
 *                        responder's type 2 window of that rkey as it arrives
 */
inline void post_empty_send(ibv_qp *qp, std::uint64_t wr_id, const char *what, std::uint32_t invalidate_rkey = 0)
{
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = invalidate_rkey ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND;
    wr.invalidate_rkey = invalidate_rkey;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    rdma_samples::check_rc(ibv_post_send(qp, &wr, &bad_wr), what);
}

} // namespace window
