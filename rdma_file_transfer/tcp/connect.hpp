/**
 * @file connect.hpp
 * @brief The TCP twin's connection, made: the receiver's socket(), bind(), listen() and a bounded
 * accept(); the sender's socket() and connect(), tried again while nobody listens, within -t. Where
 * the RDMA pair resolves an address and a route, creates a QP and exchanges its number in RDMA CM's
 * handshake, TCP needs a socket and the kernel's three-way handshake.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace rdma_file_transfer::tcp {

/** @brief @p fd ready for the transfer: non-blocking (every wait is a poll() bounded by -t), and with
 *  Nagle's algorithm off: we always send whole chunks or messages, and a message held back until the
 *  bytes before it are acknowledged would add a delayed ACK's 40 ms to the measurement. */
inline void prepare_socket(int fd)
{
    const int one = 1;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        rdma_samples::fail_errno("fcntl/setsockopt(TCP_NODELAY)", errno);
}

/** @brief The address of the other end of @p fd, as "ADDR port N". */
inline std::string peer_name(int fd)
{
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
    if (getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0)
        getnameinfo(reinterpret_cast<sockaddr *>(&ss), len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    const std::string shown = host;
    const bool mapped = shown.rfind("::ffff:", 0) == 0 && shown.find('.') != std::string::npos; // IPv4 on IPv6
    return (mapped ? shown.substr(7) : shown) + " port " + port;
}

/** @brief A socket listening on @p port of every address, IPv6 and IPv4 (IPv4 only where the host has
 *  no IPv6). @return the listening socket */
inline rdma_samples::Fd listen_on(std::uint16_t port)
{
    int raw = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool v6 = raw >= 0; // (no IPv6 here: IPv4 only)
    rdma_samples::Fd fd(v6 ? raw : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket(SOCK_STREAM)");
    const int zero = 0, one = 1;
    sockaddr_in6 any6{.sin6_family = AF_INET6,
                      .sin6_port = htons(port),
                      .sin6_flowinfo = 0,
                      .sin6_addr = in6addr_any,
                      .sin6_scope_id = 0};
    sockaddr_in any4{.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(INADDR_ANY)}, .sin_zero = {}};
    const sockaddr *addr = v6 ? reinterpret_cast<const sockaddr *>(&any6) : reinterpret_cast<const sockaddr *>(&any4);
    const socklen_t len = v6 ? sizeof any6 : sizeof any4;
    if (v6)
        setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); // IPv4 peers too
    // SO_REUSEADDR: a port whose last connection is in TIME_WAIT can be listened on again at once.
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd.get(), addr, len) != 0)
        rdma_samples::fail_errno("bind(port " + std::to_string(port) + ")", errno,
                                 errno == EADDRINUSE ? "another program (an earlier receiver?) listens on port " +
                                                           std::to_string(port) + "; choose another -lp"
                                                     : "choose a port from 1024 to 65535 with -lp");
    if (listen(fd.get(), 1) != 0)
        rdma_samples::fail_errno("listen", errno);
    if (rdma_samples::verbose()) // (-v: the socket calls that make the connection; not every send() and recv())
        rdma_samples::info("[socket] socket(), bind(port %u), listen() = fd %d", port, fd.get());
    return fd;
}

/** @brief The first connection on @p listener, within @p timeout_s: poll() sleeps until the kernel has
 *  finished a three-way handshake, accept() takes it. @return the connected socket */
inline rdma_samples::Fd accept_one(int listener, int timeout_s)
{
    for (const rdma_samples::Deadline deadline(timeout_s);;) {
        pollfd pfd{listener, POLLIN, 0};
        const int n = poll(&pfd, 1, deadline.left_ms());
        if (n < 0 && errno != EINTR)
            rdma_samples::fail_errno("poll", errno);
        if (n > 0) {
            rdma_samples::Fd fd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
            if (fd.get() >= 0) {
                prepare_socket(fd.get());
                if (rdma_samples::verbose())
                    rdma_samples::info("[socket] accept() = fd %d", fd.get());
                return fd;
            }
            if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR) // (a client gone already)
                rdma_samples::fail_errno("accept", errno);
        }
        if (deadline.expired())
            throw rdma_samples::timeout_error(timeout_s, "the sender to connect",
                                              "start tcp_file_sender -sa ADDR FILE");
    }
}

/** @brief One connect() to @p ai, within @p deadline. @param fd set to the connected socket
 *  @return 0, or why not: ECONNREFUSED (nobody listens), ETIMEDOUT (no answer within the deadline)... */
inline int connect_once(const addrinfo &ai, const rdma_samples::Deadline &deadline, std::optional<rdma_samples::Fd> &fd)
{
    rdma_samples::Fd s(socket(ai.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket(SOCK_STREAM)");
    prepare_socket(s.get()); // non-blocking: connect() returns at once, poll() waits for the handshake
    if (connect(s.get(), ai.ai_addr, ai.ai_addrlen) != 0 && errno != EINPROGRESS)
        return errno;
    pollfd pfd{s.get(), POLLOUT, 0};
    while (poll(&pfd, 1, deadline.left_ms()) < 0)
        if (errno != EINTR)
            rdma_samples::fail_errno("poll", errno);
    int err = ETIMEDOUT;
    socklen_t len = sizeof err;
    if (pfd.revents != 0 && getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0)
        fd.emplace(std::move(s));
    return err;
}

/** @brief A connection to @p addr (an IPv4 or IPv6 address) port @p port, tried again while nobody
 *  listens there (the receiver may start after us), for up to @p timeout_s. @return the socket */
inline rdma_samples::Fd connect_to(const std::string &addr, std::uint16_t port, int timeout_s)
{
    const std::string peer = addr + " port " + std::to_string(port);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV; // no name lookup: it would wait unbounded by -t
    addrinfo *found = nullptr;
    if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr)
        throw rdma_samples::UsageError("-sa: expected an IPv4 or IPv6 address, got " + rdma_samples::quote(addr));
    const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> ai(found, freeaddrinfo);
    const rdma_samples::Deadline deadline(timeout_s);
    bool refused = false; // (a last try cut short by the clock is not "no answer" when every other was refused)
    for (int wait_ms = 100;; wait_ms = std::min(2 * wait_ms, 1000)) {
        std::optional<rdma_samples::Fd> fd;
        const int err = connect_once(*ai, deadline, fd);
        if (fd) {
            if (rdma_samples::verbose())
                rdma_samples::info("[socket] socket(), connect(%s) = fd %d", peer.c_str(), fd->get());
            return std::move(*fd);
        }
        if (err != ECONNREFUSED && err != ETIMEDOUT)
            rdma_samples::fail_errno("connect(" + peer + ")", err,
                                     "check the address and the route (ip route get " + addr + ")");
        refused = refused || err == ECONNREFUSED;
        if (err == ETIMEDOUT || deadline.expired())
            throw rdma_samples::Error(refused
                                          ? "connect(" + peer + "): nobody listens there (ECONNREFUSED)"
                                          : "timed out after " + std::to_string(timeout_s) + " s connecting to " + peer,
                                      "is the receiver running on " + peer +
                                          "? start it first (tcp_file_receiver -o DIR), with the same -lp");
        if (wait_ms == 100)
            rdma_samples::info("nobody listens on %s yet; trying again for up to %d s", peer.c_str(), timeout_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait_ms, deadline.left_ms())));
    }
}

} // namespace rdma_file_transfer::tcp
