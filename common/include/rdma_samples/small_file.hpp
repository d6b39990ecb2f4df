/**
 * @file small_file.hpp
 * @brief A small text file read whole, bounded in time and memory whatever sits at its path: what a
 * descriptor file and rdma_file_receiver's --keys file are read with.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <cstddef>
#include <string>

namespace rdma_samples {

/** @brief Something at the path that is not a small regular file: a directory, a FIFO, a socket, a
 *  device node, or a file over the bound. What it is, in what(). */
class SmallFileError : public Error {
public:
    /** @param what the path and what is wrong with it */
    explicit SmallFileError(const std::string &what) : Error(what, "name a small regular file") {}
};

/**
 * @brief Read the regular file at @p path, at most @p max_bytes of it, and return at once whatever sits
 * there: a FIFO would block open() and read(), a device such as /dev/zero never ends, a directory is not
 * a file. A symlink is judged by what it points to. Nothing past @p max_bytes + 1 bytes is read.
 * @param path      the file
 * @param max_bytes the most it may hold
 * @param noun      what it is, for messages ("descriptor file", "--keys file")
 * @param exists    set to false when nothing is at @p path
 * @return its text (empty when it does not exist)
 * @throws SmallFileError "PATH: is a directory, not a NOUN", "PATH: is a FIFO, not a regular file; a
 * NOUN is a small text file", "PATH: is too large (N bytes; at most MAX for a NOUN)"
 * @throws Error when stat() or open() fails for another reason than the path not existing
 */
std::string read_small_file(const std::string &path, std::size_t max_bytes, const std::string &noun, bool &exists);

} // namespace rdma_samples
