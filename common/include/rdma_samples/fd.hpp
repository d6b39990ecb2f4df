/**
 * @file fd.hpp
 * @brief A plain file descriptor that closes itself: the one the programs share for what is not RDMA
 * (an epoll, a timerfd, a memfd, /dev/udmabuf, the file a transfer reads).
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <unistd.h>

#include <cerrno>
#include <string>

namespace rdma_samples {

/** @brief A file descriptor, closed when it goes out of scope. */
class Fd {
public:
    /** @param fd an open descriptor, or -1 (none) */
    explicit Fd(int fd = -1) : fd_(fd) {}
    /**
     * @brief Take what a system call returned, checked: -1 throws Error naming @p call and errno.
     * @param fd the call's return @param call its name, for the error
     */
    Fd(int fd, const std::string &call) : fd_(fd)
    {
        if (fd < 0)
            fail_errno(call, errno);
    }
    /** @brief Take @p o's descriptor; @p o holds none after. @param o the descriptor's owner until now */
    Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    Fd &operator=(Fd &&) = delete;
    ~Fd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    /** @brief Close the descriptor now (as std::unique_ptr::reset() does); it holds none after. */
    void reset()
    {
        if (fd_ >= 0)
            close(fd_);
        fd_ = -1;
    }
    /** @brief The descriptor. @return it, or -1 */
    int get() const { return fd_; }

private:
    int fd_;
};

} // namespace rdma_samples
