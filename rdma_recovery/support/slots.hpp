/**
 * @file slots.hpp
 * @brief rdma_recovery's slots of memory: their size, what WRITE #i carries, and how the responder's
 * (or the server's) slots are printed. Nothing here is RDMA.
 */
#pragma once

#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>

#include <cstddef>
#include <cstring>
#include <string>

namespace rdma_recovery {

/** @brief Bytes of one slot: WRITE #i lands in slot i of the responder's memory. */
inline constexpr std::size_t slot_size = 32;
/** @brief Slots the responder exports, and so the most WRITEs a requester may post (a send queue of 16). */
inline constexpr int max_slots = 16;

/** @brief What WRITE @p i (from 1) carries, and what slot @p i holds after it.
 *  @param i the WRITE's number @return the text */
inline std::string slot_text(int i)
{
    return "write #" + std::to_string(i);
}

/** @brief The sender's memory: slot i (from 1) holds slot_text(i), for the @p count slots it sends and
 *  no more (what is registered is what the device may read). @param count slots @return the buffer */
inline rdma_samples::Buffer source_slots(int count)
{
    rdma_samples::Buffer buf(static_cast<std::size_t>(count) * slot_size);
    for (int i = 1; i <= count; ++i)
        std::memcpy(buf.data() + (i - 1) * slot_size, slot_text(i).data(), slot_text(i).size());
    return buf;
}

/**
 * @brief Print the responder's slots: the text in each, or "(empty)". Slots are zero-filled at start,
 * and what lands in one is a WRITE's bytes: printed quoted and bounded by the slot.
 * @param owner  whose memory, e.g. "Responder"
 * @param memory the exported buffer, max_slots x slot_size bytes
 * @param when   e.g. "before the recovery"
 */
inline void print_slots(const char *owner, const char *memory, const char *when)
{
    rdma_samples::result("%s memory %s:", owner, when);
    int last = max_slots; // slots after the last written one are not printed
    while (last > 0 && memory[(last - 1) * slot_size] == '\0')
        --last;
    for (int i = 0; i < last; ++i) {
        const char *slot = memory + static_cast<std::size_t>(i) * slot_size;
        const std::size_t len = strnlen(slot, slot_size);
        if (len == 0)
            rdma_samples::result("  slot %d: (empty)", i + 1);
        else
            rdma_samples::result("  slot %d: \"%.*s\"", i + 1, static_cast<int>(len), slot);
    }
}

} // namespace rdma_recovery
