/**
 * @file memory.hpp
 * @brief Page-aligned buffers for memory regions, and access flags spelled out.
 *
 * The samples call ibv_reg_mr() themselves, because the access flags they pass are the lesson: a memory
 * region grants exactly what its operation needs (DOCA's permission table) and nothing more.
 */
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace rdma_samples {

/** @brief A zero-filled, page-aligned buffer; freed when it goes out of scope. */
class Buffer {
public:
    /** @param size bytes; the allocation is rounded up to whole pages */
    explicit Buffer(std::size_t size);
    /** @brief First byte.
     *  @return the buffer's address */
    char *data() const { return data_.get(); }
    /** @brief The size asked for.
     *  @return bytes */
    std::size_t size() const { return size_; }

private:
    struct Free {
        void operator()(char *p) const;
    };
    std::unique_ptr<char, Free> data_;
    std::size_t size_;
};

/**
 * @brief IBV_ACCESS_* flags as text, e.g. "local_write|remote_write"; "local_read_only" for 0.
 * @param access the flags
 * @return their names, joined with '|'
 */
std::string access_to_string(int access);

/**
 * @brief Parse access_to_string()'s text back.
 * @param text the names, joined with '|'
 * @return the flags, or -1 when the text names something unknown
 */
int access_from_string(const std::string &text);

} // namespace rdma_samples
