/**
 * @file doca.hpp
 * @brief The values NVIDIA DOCA's RDMA samples use, in one place, so that a DOCA user meets the same
 *        numbers here (chapter 15 maps each DOCA call to its verbs).
 */
#pragma once

#include <cstdint>

namespace rdma_samples::doca {

/** The immediate value DOCA's write-with-immediate and send-with-immediate samples carry. */
inline constexpr std::uint32_t immediate = 0xABCD;

/** DOCA's remote sync event sample: the requester's first notify-set. */
inline constexpr std::uint64_t notify_value = 0xD0CA;
/** DOCA's remote sync event sample: the responder's answer, one above. */
inline constexpr std::uint64_t signal_value = 0xD0CB;
/** DOCA's remote sync event sample: the requester's completion value. */
inline constexpr std::uint64_t done_value = UINT64_MAX;

} // namespace rdma_samples::doca
