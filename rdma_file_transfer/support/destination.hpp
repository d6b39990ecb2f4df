/**
 * @file destination.hpp
 * @brief Where rdma_file_receiver stores the file, which is not RDMA: the sender's name checked as a
 * file name (bad_name()), and the directory and name it goes to (destination()). The file itself, which
 * appears under that name only when complete and verified, is part_file.hpp.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdint>
#include <optional>
#include <string>

namespace rdma_file_transfer {

using rdma_samples::Error;

/** @brief What the temporary name adds to the final one: "." NAME "." up to 10 digits ".part". */
inline constexpr std::size_t temp_name_extra = 17;

/** @brief The longest name the receiver stores: its temporary name must fit NAME_MAX too. */
inline constexpr std::size_t max_name = NAME_MAX - temp_name_extra;

/** @brief The code point that starts at @p text[@p i], and how many bytes it takes; nothing when the
 *  bytes there are not UTF-8 (a stray continuation byte, a sequence cut short, an overlong form, a
 *  surrogate, beyond U+10FFFF). @param text any bytes @param i where to read @param len set to its size */
inline std::optional<char32_t> utf8_at(const std::string &text, std::size_t i, std::size_t &len)
{
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const unsigned char c = b(0);
    len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || i + len > text.size())
        return std::nullopt;
    char32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (std::size_t k = 1; k < len; ++k) {
        if ((b(k) & 0xc0) != 0x80)
            return std::nullopt;
        cp = (cp << 6) | (b(k) & 0x3f);
    }
    constexpr char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return std::nullopt;
    return cp;
}

/** @brief Whether @p cp is a format character that changes how the text around it is shown, not a
 *  letter: the bidirectional controls (U+202E turns "txt.exe" into what reads as "exe.txt"), zero-width
 *  characters, the soft hyphen, the byte order mark, the tag characters. @param cp a code point */
inline bool invisible_format(char32_t cp)
{
    return cp == 0xad || cp == 0x61c || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff ||
           (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe0000 && cp <= 0xe007f);
}

/** @brief @p cp as Unicode writes it after "U+": at least 4 hex digits, upper case. @param cp it @return them */
inline std::string code_point_hex(char32_t cp)
{
    char b[16];
    std::snprintf(b, sizeof b, "%04X", static_cast<unsigned>(cp));
    return b;
}

/** @brief Why @p name may not be used as a file name in the receiver's directory; nothing when it may.
 *  A name from the network is input, never a path: no /, and nothing that starts with . (a hidden file
 *  such as .profile or .bash_login, or . and ..) or - (read as a flag by the next tool that sees it).
 *  And it is text a person will read in a listing: UTF-8 without control characters (C0, DEL, C1) or
 *  invisible format characters, so that what `ls` shows is the name. */
inline std::optional<std::string> bad_name(const std::string &name)
{
    if (name.empty())
        return "is empty";
    if (name[0] == '.' || name[0] == '-')
        return "starts with " + name.substr(0, 1) + " (hidden files and names that read as flags are refused)";
    if (name.size() > max_name)
        return "is " + std::to_string(name.size()) + " bytes; at most " + std::to_string(max_name) + " fit (NAME_MAX " +
               std::to_string(NAME_MAX) + ", less " + std::to_string(temp_name_extra) + " for the temporary name)";
    for (std::size_t i = 0, len = 0; i < name.size(); i += len) {
        const std::optional<char32_t> cp = utf8_at(name, i, len);
        if (!cp)
            return "is not UTF-8 (byte " + std::to_string(i) + ")";
        if (*cp == '/')
            return "contains /";
        if (*cp < 0x20 || (*cp >= 0x7f && *cp <= 0x9f))
            return "contains a control character";
        if (invisible_format(*cp))
            return "contains an invisible format character (U+" + code_point_hex(*cp) +
                   ": bidirectional controls and zero-width characters hide what the name says)";
    }
    return std::nullopt;
}

/** @brief Where the file goes: a directory (as -o names it) and a name in it. */
struct Destination {
    std::string dir;  ///< the directory, as -o gives it ("." when -o is a bare name)
    std::string name; ///< the file's name in it
    /** @brief The path, for messages. @return dir/name */
    std::string path() const { return dir == "." ? name : dir == "/" ? "/" + name : dir + "/" + name; }
};

/** @brief Where the file goes: -o @p out itself, or, when it is a directory, @p name in it.
 *  @throws Error when @p name cannot be a file name there (bad_name()) */
inline Destination destination(const std::string &out, const std::string &name)
{
    struct stat st {};
    if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        const std::size_t slash = out.rfind('/');
        const std::string base = out.substr(slash + 1);
        if (base.empty())
            throw Error("-o " + rdma_samples::quote(out) + " ends with / but is not a directory",
                        "create the directory, or name a file");
        if (base.size() > max_name)
            throw Error("-o " + rdma_samples::quote(out) + ": its last component is " + std::to_string(base.size()) +
                            " bytes; at most " + std::to_string(max_name) + " leave room for the temporary name",
                        "choose a shorter -o");
        return {slash == std::string::npos ? "." : slash == 0 ? "/" : out.substr(0, slash), base};
    }
    if (const std::optional<std::string> why = bad_name(name))
        throw Error("the name " + rdma_samples::quote(name) + " " + *why, "send it with another --name");
    return {out, name};
}

/** @brief @p path for the receiver's last line, sha256sum's "DIGEST  PATH": as it is when every byte is
 *  printable ASCII, quoted (quote()) when not, so that a name from the network never reaches the
 *  terminal raw. @param path the destination's @return it, ready to print */
inline std::string shown_path(const std::string &path)
{
    for (unsigned char c : path)
        if (c < 0x20 || c >= 0x7f)
            return rdma_samples::quote(path, path.size());
    return path;
}

} // namespace rdma_file_transfer
