/**
 * @file keys.hpp
 * @brief rdma_file_receiver's --keys file, and its answer to the sender's ID (a key, a refusal, or a
 * receipt without --keys), which is not RDMA.
 */
#pragma once

#include "../protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/small_file.hpp>
#include <rdma_samples/text.hpp>

#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace rdma_file_transfer {

using rdma_samples::Error;

/** @brief ID -> key, as the receiver's --keys file gives them. */
using Keys = std::map<std::string, std::string>;

/** @brief The most bytes a --keys file may hold: about ten thousand lines of an ID and a key. */
inline constexpr std::size_t max_keys_file = 1 << 20;

/** @brief The receiver's --keys file: one "ID KEY" per line; blank lines and # comments skipped. Read
 *  once, before the receiver listens, and bounded whatever sits at the path (read_small_file()): a FIFO,
 *  a directory, /dev/zero or a huge file is refused at once. So is a file without a single key, which
 *  would refuse every ID after the whole transfer.
 *  @param path the file, or none without --keys @return ID -> key, or none without --keys */
inline std::optional<Keys> load_keys(const std::optional<std::string> &path)
{
    if (!path)
        return std::nullopt;
    const std::string hint = "--keys names a small text file of \"ID KEY\" lines";
    bool exists = false;
    std::string text;
    try {
        text = rdma_samples::read_small_file(*path, max_keys_file, "--keys file", exists);
    } catch (const rdma_samples::SmallFileError &e) {
        throw Error(e.what(), hint);
    }
    if (!exists)
        rdma_samples::fail_errno("open(" + rdma_samples::quote(*path) + ")", ENOENT, "check --keys");
    Keys keys;
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty() || line[0] == '#')
            continue;
        const std::string where = *path + ":" + std::to_string(n) + ": ";
        const std::size_t sp = line.find(' ');
        if (sp == 0 || sp == std::string::npos || sp + 1 == line.size())
            throw Error(where + "expected \"ID KEY\", got " + rdma_samples::quote(line),
                        "one ID and its key per line, separated by one space");
        if (line.size() - sp - 1 >= max_text)
            throw Error(where + "the key is " + std::to_string(line.size() - sp - 1) + " bytes; at most " +
                            std::to_string(max_text - 1) + " fit in a message",
                        "use a shorter key");
        keys[line.substr(0, sp)] = line.substr(sp + 1);
    }
    if (keys.empty())
        throw Error(*path + ": no key in it (only blank lines and # comments)",
                    "add an \"ID KEY\" line, or leave out --keys to answer every ID with a receipt");
    return keys;
}

/** @brief The answer to the sender's ID @p who (workflow step 7): its key from --keys, a refusal of an
 *  ID not there, or, without --keys (@p keys none), a
 *  receipt for the @p received bytes whose SHA-256 is @p digest. */
inline ControlMessage answer_id(const std::optional<Keys> &keys, const std::string &who, std::uint64_t received,
                                const Digest &digest)
{
    if (!keys)
        return make_message(MessageType::receipt,
                            "received " + std::to_string(received) + " bytes, sha256 " + hex(digest) + ", for " + who);
    if (const auto key = keys->find(who); key != keys->end())
        return make_message(MessageType::key, key->second);
    return make_message(MessageType::refusal, "unknown ID " + rdma_samples::quote(who) +
                                                  ": no key\nask the receiver's operator to add the ID to its --keys "
                                                  "file; the file itself arrived intact");
}

/** @brief What answer_id() answered with, for the receiver's output. @param answer its message
 *  @return "its key", "a receipt" or "a refusal (unknown ID)" */
inline const char *answer_name(const ControlMessage &answer)
{
    if (answer.type == static_cast<std::uint16_t>(MessageType::key))
        return "its key";
    if (answer.type == static_cast<std::uint16_t>(MessageType::receipt))
        return "a receipt";
    return "a refusal (unknown ID)";
}

} // namespace rdma_file_transfer
