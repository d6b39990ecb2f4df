/**
 * @file fds.hpp
 * @brief The plain Linux file descriptors around rdma_event_loop's server: epoll, a timerfd, a
 * signalfd, O_NONBLOCK. Nothing here is RDMA; server.cpp puts the RDMA fds into the same epoll.
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace rdma_event_loop {

using rdma_samples::Fd; // closes itself; Fd(call's return, call's name) checks the call (common/fd.hpp)

/** @brief Make @p fd non-blocking: a read (or ibv_get_cq_event()) with nothing to take fails with EAGAIN.
 *  @param fd the descriptor @param what whose it is, for the error */
inline void set_nonblocking(int fd, const std::string &what)
{
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        rdma_samples::fail_errno("fcntl(O_NONBLOCK) on " + what, errno);
}

/** @brief Watch @p fd for input in epoll @p ep; the event carries @p fd back.
 *  @param ep the epoll @param fd what to watch @param what its name, for the error */
inline void watch(const Fd &ep, int fd, const std::string &what)
{
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
        rdma_samples::fail_errno("epoll_ctl(ADD, " + what + ")", errno);
}

/** @brief A signalfd for SIGINT and SIGTERM, which are blocked: they arrive as input, in the loop.
 *  @return the descriptor */
inline int signal_fd()
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0)
        rdma_samples::fail_errno("sigprocmask(SIG_BLOCK)", errno);
    return signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

/** @brief Arm timerfd @p tfd to fire once at @p when (CLOCK_MONOTONIC, absolute), or disarm it.
 *  @param tfd the timerfd @param when the deadline @param armed false: disarm */
template <typename TimePoint>
void arm_timer(const Fd &tfd, TimePoint when, bool armed)
{
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
    itimerspec its{};
    if (armed) { // (a zero it_value would disarm it: a deadline already past fires at 1 ns)
        its.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
        its.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(tfd.get(), TFD_TIMER_ABSTIME, &its, nullptr) != 0)
        rdma_samples::fail_errno("timerfd_settime", errno);
}

/** @brief Read whatever @p fd holds (a timer's count, a signal's info), so epoll stops reporting it.
 *  @param fd the descriptor @param buf,len where to read @return bytes read, or -1 (EAGAIN: nothing) */
inline ssize_t drain_fd(int fd, void *buf, std::size_t len)
{
    return read(fd, buf, len);
}

} // namespace rdma_event_loop
