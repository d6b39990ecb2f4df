/**
 * @file window.hpp
 * @brief What rdma_memory's window pair shares: the region's shape, the wr_ids of its five messages, the
 * zero-length SEND they are made of (their receives: post_empty_receive(), exchange.hpp) and the
 * responder's look at the region (the flags are in support/options.hpp).
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

#include "support/options.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/text.hpp>

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rdma_memory::window {

/** @brief Bytes the responder registers: one page. The window is a part of it. */
inline constexpr std::size_t region_size = 4096;

inline constexpr std::uint64_t request_wr_id = 0x61;    ///< the requester's "grant me a window"
inline constexpr std::uint64_t done_wr_id = 0x62;       ///< its "done with the window"
inline constexpr std::uint64_t revoked_wr_id = 0x63;    ///< the responder's "revoked"
inline constexpr std::uint64_t bind_wr_id = 0xb1;       ///< the bind (type 1: ibv_bind_mw; type 2: a work request)
inline constexpr std::uint64_t invalidate_wr_id = 0xb2; ///< type 2's revocation, IBV_WR_LOCAL_INV

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
    rdma_samples::check_post(ibv_post_send(qp, &wr, &bad_wr), what);
}

/**
 * @brief Stop at step 1 on a device without memory windows (max_mw 0, as Soft-iWARP's siw), or without
 * the kind asked for. Both sides ask: the responder binds the window, and the requester, which needs
 * none of its own, would otherwise wait out -t for a responder that refused (the pair is run with both
 * sides on one kind of device).
 * @param dev  the open device
 * @param type the window type the responder binds (--type), or 0: any
 * @throws rdma_samples::Error naming the device and what it has
 */
inline void require_windows(const rdma_samples::Device &dev, int type = 0)
{
    if (dev.device_attr.max_mw == 0)
        throw rdma_samples::Error("device " + dev.name + " has no memory windows (max_mw 0)",
                                  "run the pair where the responder's device binds windows (Soft-RoCE, mlx5); "
                                  "Soft-iWARP has none");
    //! [caps]
    // A device says which windows it has in its capability flags: MEM_WINDOW for type 1, TYPE_2A or
    // TYPE_2B for type 2 (2B: the window is tied to one QP, what most devices, and Soft-RoCE, do).
    const unsigned caps = dev.device_attr.device_cap_flags;
    const bool has_type = type == 1   ? (caps & IBV_DEVICE_MEM_WINDOW) != 0
                          : type == 2 ? (caps & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0
                                      : true;
    if (!has_type)
        throw rdma_samples::Error(
            "device " + dev.name + " has no type " + std::to_string(type) + " memory windows (device_cap_flags " +
                rdma_samples::hex(caps) + ", max_mw " + std::to_string(dev.device_attr.max_mw) + ")",
            "use --type " + std::string(type == 1 ? "2" : "1") +
                " if the device has that kind, or a device with memory windows (mlx5, Soft-RoCE)");
    //! [caps]
}

/**
 * @brief The responder's look at its zero-filled region after the requester's WRITE: print what the
 * window holds, and refuse any changed byte outside it.
 * @param region the region, all zero before the requester wrote
 * @param opt    where the window is
 * @throws rdma_samples::Error naming how many bytes outside the window changed
 */
inline void check_window(const rdma_samples::Buffer &region, const WindowResponderOptions &opt)
{
    const char *window_bytes = region.data() + opt.offset;
    std::size_t first = 0; // the first byte written (a WRITE may start anywhere in the window)
    while (first < opt.length && window_bytes[first] == 0)
        ++first;
    const std::size_t written = strnlen(window_bytes + first, opt.length - first);
    rdma_samples::result("Window holds: \"%.*s\"%s", static_cast<int>(written), window_bytes + first,
                         first > 0 && first < opt.length ? (" (from byte " + std::to_string(first) + ")").c_str() : "");
    std::size_t changed = 0;
    for (std::size_t i = 0; i < region.size(); ++i)
        if ((i < opt.offset || i >= std::size_t{opt.offset} + opt.length) && region.data()[i] != 0)
            ++changed;
    if (changed != 0)
        throw rdma_samples::Error(std::to_string(changed) + " byte(s) outside the window changed",
                                  "the requester wrote past the window and our device let it: Soft-RoCE checks a "
                                  "window's rkey, access and region, not its bounds (chapter 18)");
    rdma_samples::result("Outside the window: all %zu bytes unchanged", region.size() - opt.length);
}

} // namespace rdma_memory::window
