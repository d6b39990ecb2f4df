/** @file text.cpp @brief Outside text quoted for a message; the one number parser. */
#include <rdma_samples/text.hpp>

#include <algorithm>
#include <cstdio>

namespace rdma_samples {

std::string quote(const std::string &text, std::size_t max)
{
    std::string out = "\"";
    const std::size_t shown = std::min(text.size(), max);
    for (std::size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c == '"' || c == '\\')
            out += std::string("\\") + static_cast<char>(c);
        else if (c < 0x20 || c >= 0x7f) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\x%02x", c);
            out += esc;
        } else
            out += static_cast<char>(c);
    }
    out += shown < text.size() ? "...\" (" + std::to_string(text.size()) + " bytes)" : "\"";
    return out;
}

std::optional<std::uint64_t> parse_unsigned(const std::string &text, NumberBase base, std::uint64_t max)
{
    const bool has_0x =
        text.size() > 2 && text[0] == '0' && (text[1] == 'x' || (base == NumberBase::either && text[1] == 'X'));
    const bool hex = base == NumberBase::hex || (base == NumberBase::either && has_0x);
    if (hex && !has_0x)
        return std::nullopt;
    const std::string digits = hex ? text.substr(2) : text;
    if (digits.empty() || digits.size() > (hex ? 16u : 20u))
        return std::nullopt;
    const std::uint64_t radix = hex ? 16 : 10;
    std::uint64_t v = 0;
    for (char c : digits) {
        std::uint64_t d;
        if (c >= '0' && c <= '9')
            d = static_cast<std::uint64_t>(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = static_cast<std::uint64_t>(c - 'a' + 10);
        else if (hex && base == NumberBase::either && c >= 'A' && c <= 'F')
            d = static_cast<std::uint64_t>(c - 'A' + 10);
        else
            return std::nullopt;
        if (v > (UINT64_MAX - d) / radix)
            return std::nullopt;
        v = v * radix + d;
    }
    if (v > max)
        return std::nullopt;
    return v;
}

std::string hex(std::uint64_t v, int width)
{
    char b[32];
    std::snprintf(b, sizeof b, "0x%0*llx", width, static_cast<unsigned long long>(v));
    return b;
}

} // namespace rdma_samples
