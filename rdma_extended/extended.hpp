/**
 * @file extended.hpp
 * @brief What both sides of rdma_extended share: the layout of the responder's exported memory, the
 * owner of an extended CQ, and one bounded poll loop written with the extended calls
 * (ibv_start_poll(), ibv_next_poll(), ibv_end_poll() and the ibv_wc_read_*() accessors); and whether the
 * device can do RDMA atomic write (the requester's --atomic-write).
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/wait.hpp>

#include <infiniband/verbs.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace rdma_extended {

/** @brief The responder's exported memory: where each one-sided operation of the requester lands. */
struct Exported {
    char written[64];      ///< RDMA WRITE puts its text here; the READ reads it back from here
    char written_imm[64];  ///< RDMA WRITE with immediate puts its text here
    std::uint64_t counter; ///< fetch-and-add and compare-and-swap work on this naturally aligned word
};
static_assert(offsetof(Exported, counter) % 8 == 0, "an atomic needs an 8-byte aligned word");

/** @brief The requester's SEND carries this many bytes at most; the responder's receive holds them. */
inline constexpr std::uint32_t send_room = 64;

/** @brief The longest text the requester writes (-w): the slots are 64 bytes, " (with immediate)" added. */
inline constexpr std::size_t max_text = 40;

/** @brief The immediate value of the WRITE with immediate (DOCA's, as in chapter 4). */
inline constexpr std::uint32_t immediate = 0xABCD;

/** @brief Owner of an extended CQ: it is destroyed through the classic CQ it contains. */
struct CqExDeleter {
    void operator()(ibv_cq_ex *cq) const { ibv_destroy_cq(ibv_cq_ex_to_cq(cq)); }
};
using CqExPtr = std::unique_ptr<ibv_cq_ex, CqExDeleter>; ///< ibv_create_cq_ex()

/** @brief One completion, as the accessors read it (only what the CQ was created to report). */
struct Done {
    std::uint64_t wr_id = 0;
    ibv_wc_status status = IBV_WC_SUCCESS;
    ibv_wc_opcode opcode = IBV_WC_SEND;     ///< valid only when status is IBV_WC_SUCCESS
    std::uint32_t byte_len = 0;             ///< with IBV_WC_EX_WITH_BYTE_LEN
    std::uint32_t imm = 0;                  ///< with IBV_WC_EX_WITH_IMM and IBV_WC_WITH_IMM: host order
    bool with_imm = false;                  ///< the completion carries an immediate value
    std::optional<std::uint64_t> timestamp; ///< with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: the device's clock
};

/**
 * @brief Wait (bounded by @p timeout_s) for the next completion of @p cq and read it.
 *
 * ibv_start_poll() answers ENOENT while the CQ is empty; once it returns 0 the CQ's fields describe
 * one completion (wr_id and status are plain fields, the rest is read through ibv_wc_read_*(), each
 * allowed only if the CQ was created with its IBV_WC_EX_WITH_* flag), and ibv_end_poll() must follow
 * before the next ibv_start_poll(). Between them ibv_next_poll() would read more; this loop takes one
 * at a time so that each wait names what it is for.
 * @param cq        an extended CQ, created with IBV_WC_EX_WITH_BYTE_LEN
 * @param wc_flags  the IBV_WC_EX_WITH_* flags it was created with: which fields may be read
 * @param timeout_s the bound (-t)
 * @param what      what is waited for, for the timeout message
 * @param device    the device, whose asynchronous events a timeout names
 * @return the completion
 */
inline Done next_done(ibv_cq_ex *cq, std::uint64_t wc_flags, int timeout_s, const std::string &what,
                      ibv_context *device)
{
    //! [poll]
    rdma_samples::Waiter waiter(timeout_s, what, device);
    ibv_poll_cq_attr attr{}; // (no flags exist yet: comp_mask must be 0)
    int rc = 0;
    while ((rc = ibv_start_poll(cq, &attr)) == ENOENT) // empty: nothing to end
        waiter.pause();
    rdma_samples::check_rc(rc, "ibv_start_poll");
    Done d;
    d.wr_id = cq->wr_id;   // as ibv_wc's wr_id
    d.status = cq->status; // as ibv_wc's status
    if (d.status == IBV_WC_SUCCESS) {
        d.opcode = ibv_wc_read_opcode(cq);
        d.byte_len = ibv_wc_read_byte_len(cq);
        d.with_imm = (wc_flags & IBV_WC_EX_WITH_IMM) && (ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM);
        if (d.with_imm)
            d.imm = be32toh(ibv_wc_read_imm_data(cq));
        if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
            d.timestamp = ibv_wc_read_completion_ts(cq);
    }
    ibv_end_poll(cq); // the completion is consumed: its slot goes back to the device
    //! [poll]
    return d;
}

/**
 * @brief Check a completion as chapter 2 does (rdma_samples::check_wc(): the status's name, its hint):
 * it must be a success of @p expected.
 * @param d        the completion
 * @param expected the opcode it must have
 * @param what     the request, for the error, e.g. "the RDMA READ"
 */
inline void check_done(const Done &d, ibv_wc_opcode expected, const std::string &what)
{
    ibv_wc wc{};
    wc.wr_id = d.wr_id;
    wc.status = d.status;
    wc.opcode = d.opcode;
    wc.byte_len = d.byte_len;
    rdma_samples::check_wc(wc, expected, what);
}

//! [atomic_write_cap]
// RDMA atomic write (IBTA 1.5, 2020) is a capability of the device: bit 40 of device_cap_flags_ex,
// IB_UVERBS_DEVICE_ATOMIC_WRITE in the kernel's uapi (rdma/ib_user_verbs.h). Debian 12's libibverbs
// headers (rdma-core 44) name no such bit, so it is defined here. Soft-RoCE sets it from Linux 6.2 on.
inline constexpr std::uint64_t device_atomic_write = 1ULL << 40;
//! [atomic_write_cap]

/** @brief The running kernel's release (uname -r), for a message. @return e.g. "6.1.0-56-amd64" */
inline std::string kernel_release()
{
    utsname u{};
    return uname(&u) == 0 ? u.release : "unknown";
}

/** @brief Whether @p dev says it can do RDMA atomic write (ibv_query_device_ex()).
 *  @param dev the open device @return true when bit 40 of device_cap_flags_ex is set */
inline bool has_atomic_write(const rdma_samples::Device &dev)
{
    ibv_device_attr_ex attr{};
    rdma_samples::check_rc(ibv_query_device_ex(dev.ctx.get(), nullptr, &attr), "ibv_query_device_ex");
    return (attr.device_cap_flags_ex & device_atomic_write) != 0;
}

} // namespace rdma_extended
