/**
 * @file fuzz_common.hpp
 * @brief What every fuzz target checks of an error message, beyond "no crash": the message is one line,
 * has no raw control byte, and stays short, whatever the input was.
 */
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuzz {

/** @brief The longest error line a fuzz input may produce (a quoted value is cut at 60 characters). */
inline constexpr std::size_t max_message = 400;

/** @brief Abort (a finding) unless @p message is one printable line of at most max_message bytes. */
inline void check_message(const std::string &message, const char *what)
{
    bool printable = true;
    for (unsigned char c : message)
        printable = printable && c >= 0x20 && c < 0x7f;
    if (printable && !message.empty() && message.size() <= max_message)
        return;
    std::fprintf(stderr, "%s: bad error message (%zu bytes, %s): %.400s\n", what, message.size(),
                 printable ? "too long or empty" : "raw control or non-ASCII byte", message.c_str());
    std::abort();
}

/** @brief Abort (a finding) unless @p ok. */
inline void require(bool ok, const char *what)
{
    if (ok)
        return;
    std::fprintf(stderr, "property violated: %s\n", what);
    std::abort();
}

} // namespace fuzz
