/**
 * @file text.hpp
 * @brief Text from outside (flags, descriptor files) made safe for a one-line message, and the one
 * number parser that flags and descriptors share.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rdma_samples {

/**
 * @brief A value from outside (a flag, a line of a file) quoted for a one-line message: control bytes,
 * bytes that are not ASCII, quotes and backslashes escaped (\\n, \\r, \\t, \\xNN), and cut after
 * @p max characters with the full size added, so no terminal ever sees a raw control byte or a 100 KB line.
 * @param text the value, any bytes
 * @param max  the most characters of @p text shown
 * @return e.g. "\"abc\"", "\"a\\x00b\"", "\"aaaa...\" (100000 bytes)"
 */
std::string quote(const std::string &text, std::size_t max = 60);

/** @brief How parse_unsigned() reads digits. */
enum class NumberBase {
    decimal, ///< digits 0-9 only (a descriptor's psn, mtu...)
    hex,     ///< "0x" then lowercase hex digits (a descriptor's addresses and keys)
    either,  ///< decimal, or "0x"/"0X" then hex digits of either case (a flag's value)
};

/**
 * @brief The one number parser: an unsigned integer of @p base, at most @p max, nothing else around it.
 *
 * Flags (parse_number()) and descriptor files both read their numbers here; each wraps a failure in
 * its own message (which flag, which file and line).
 * @param text the value as typed or read
 * @param base which digits are accepted
 * @param max  the largest value accepted
 * @return the value, or nothing when @p text is not such a number (empty, a stray byte, too large)
 */
std::optional<std::uint64_t> parse_unsigned(const std::string &text, NumberBase base, std::uint64_t max = UINT64_MAX);

/**
 * @brief A number as hex for a message or a descriptor: "0x" and at least @p width digits.
 * @param v     the number
 * @param width the fewest digits (zero-padded), e.g. 16 for a nonce
 * @return e.g. "0x00000000000000ff"
 */
std::string hex(std::uint64_t v, int width = 0);

} // namespace rdma_samples
