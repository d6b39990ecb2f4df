/**
 * @file keys.hpp
 * @brief rdma_file_receiver's --keys file, and its answer to the sender's ID (a key, a refusal, or a
 * receipt without --keys), which is not RDMA.
 */
#pragma once

#include "../protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>

namespace rdma_file_transfer {

using rdma_samples::Error;

/** @brief ID -> key, as the receiver's --keys file gives them. */
using Keys = std::map<std::string, std::string>;

/** @brief The receiver's --keys file: one "ID KEY" per line; blank lines and # comments skipped.
 *  @param path the file, or none without --keys @return ID -> key, or none without --keys */
inline std::optional<Keys> load_keys(const std::optional<std::string> &path)
{
    if (!path)
        return std::nullopt;
    std::ifstream in(*path);
    if (!in)
        rdma_samples::fail_errno("open(" + rdma_samples::quote(*path) + ")", errno, "check --keys");
    Keys keys;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty() || line[0] == '#')
            continue;
        const std::size_t sp = line.find(' ');
        if (sp == 0 || sp == std::string::npos || sp + 1 == line.size())
            throw Error(*path + ":" + std::to_string(n) + ": expected \"ID KEY\", got " + rdma_samples::quote(line),
                        "one ID and its key per line, separated by one space");
        keys[line.substr(0, sp)] = line.substr(sp + 1);
    }
    return keys;
}

/** @brief The answer to the sender's ID @p who (workflow step 7): its key from --keys, a refusal of an
 *  ID not there (a --keys file with no line refuses every ID), or, without --keys (@p keys none), a
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
