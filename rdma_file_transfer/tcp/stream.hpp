/**
 * @file stream.hpp
 * @brief The TCP twin's connection: a non-blocking socket whose every wait is a poll() bounded by -t
 * and by --deadline, the messages of protocol.hpp in and out, the file's bytes in and out, a refusal
 * that tells the peer why we stop, and the end of the connection. Both sides use it.
 *
 * This is where TCP's system calls are. Every byte crosses the kernel twice on its way: send() copies it
 * from our buffer into the socket's, recv() from the socket's into the peer's buffer; each call is a
 * system call, and poll() is one more whenever the socket is not ready. The RDMA pair posts a WRITE
 * and the NIC moves the bytes from one registered buffer into the other without either CPU copying.
 */
#pragma once

#include "protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

namespace rdma_file_transfer::tcp {

/** @brief One side's end of the connection: the socket, both clocks, who the peer is. */
struct Stream {
    rdma_samples::Fd fd;             ///< the connected socket, O_NONBLOCK
    int timeout_s;                   ///< -t: the longest any one wait may last
    rdma_samples::Deadline transfer; ///< --deadline: the end of the whole transfer
    std::string peer;                ///< "the sender" or "the receiver", for messages

    /** @brief Throws once the whole transfer has lasted --deadline. @param what what we do, for errors */
    void check_deadline(const std::string &what) const
    {
        if (transfer.expired())
            throw Error("the whole transfer took longer than --deadline " + std::to_string(transfer.timeout_s()) +
                            " s; we were waiting for " + what,
                        peer + " sends too slowly; raise --deadline for a big file on a slow link");
    }
    /** @brief Sleep in poll() until the socket is ready for @p events (POLLIN, POLLOUT), at most -t and
     *  never past --deadline. @param what what we wait for, for errors @return the events that came */
    short wait(short events, const std::string &what)
    {
        const rdma_samples::Deadline deadline(timeout_s);
        for (;;) {
            check_deadline(what);
            if (deadline.expired())
                throw rdma_samples::timeout_error(timeout_s, what,
                                                  "is " + peer + " still running? its output says why it stopped");
            pollfd pfd{fd.get(), events, 0};
            const int n = poll(&pfd, 1, std::min(deadline.left_ms(), transfer.left_ms()));
            if (n < 0 && errno != EINTR)
                rdma_samples::fail_errno("poll", errno);
            if (n > 0) // POLLERR and POLLHUP too: the recv() or send() that follows says what they mean
                return pfd.revents;
        }
    }
    /** @brief Up to @p len bytes from the socket into @p buf, waiting for the first (-t): one recv(),
     *  the kernel's copy out of the socket's buffer. @return bytes read, 0 when the peer closed its end */
    std::size_t recv_some(char *buf, std::size_t len, const std::string &what)
    {
        check_deadline(what); // (a peer that always has bytes ready never makes us wait())
        for (;;) {
            const ssize_t n = recv(fd.get(), buf, len, 0);
            if (n >= 0)
                return static_cast<std::size_t>(n);
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                wait(POLLIN, what); // empty: sleep until the peer sends
            else if (errno != EINTR)
                rdma_samples::fail_errno("recv (while we waited for " + what + ")", errno,
                                         errno == ECONNRESET
                                             ? peer + " closed the connection abruptly (reset); its output says why"
                                             : "check the network between the two sides");
        }
    }
    /** @brief Exactly @p len bytes into @p buf; @p peer closing its end first is an error that says how
     *  far it got. @param what what the bytes are, for errors */
    void recv_all(char *buf, std::size_t len, const std::string &what)
    {
        for (std::size_t got = 0; got < len;) {
            const std::size_t n = recv_some(buf + got, len - got, what);
            if (n == 0)
                throw closed_error(what, got, len);
            got += n;
        }
    }
    /** @brief The error of a peer that closed its end while we waited for @p what, @p got of its @p len
     *  bytes in. @return it */
    Error closed_error(const std::string &what, std::uint64_t got, std::uint64_t len) const
    {
        return Error(
            peer + " closed the connection " +
                (got == 0 ? "while we waited for " + what
                          : "after " + std::to_string(got) + " of the " + std::to_string(len) + " bytes of " + what),
            peer + "'s output says why; a file not yet verified is not kept");
    }
    /** @brief All @p len bytes of @p buf into the socket: poll() until there is room (the socket's
     *  buffer is full while the peer reads slower than we send), then send() copies what fits into the
     *  kernel. Usually one poll() and one send() a chunk. */
    void send_all(const char *buf, std::size_t len, const std::string &what) { send_watching(buf, len, what, POLLOUT); }
    /** @brief As send_all(), while the peer owes us nothing: the same poll() tells whether it said
     *  something meanwhile. It may only refuse, and its refusal ends the transfer with its reason. */
    void send_data(const char *buf, std::size_t len, const std::string &what)
    {
        send_watching(buf, len, what, POLLOUT | POLLIN);
    }
    /** @brief send_all(), and with @p events POLLIN, send_data(). */
    void send_watching(const char *buf, std::size_t len, const std::string &what, short events)
    {
        check_deadline(what);
        while (len > 0) {
            if (wait(events, "room to send " + what) & events & POLLIN)
                throw_what_peer_says("room to send " + what);
            // MSG_NOSIGNAL: a peer that closed makes send() fail with EPIPE instead of killing us (SIGPIPE).
            const ssize_t n = send(fd.get(), buf, len, MSG_NOSIGNAL);
            if (n >= 0) {
                buf += n;
                len -= static_cast<std::size_t>(n);
            } else if (errno == EPIPE || errno == ECONNRESET) {
                throw_what_peer_says(peer + " to take " + what); // its refusal may wait in our socket
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                rdma_samples::fail_errno("send (" + what + ")", errno);
            }
        }
    }
    /** @brief The peer's next message, checked (check_message()) and in host order. */
    Message recv_message(Type type, const std::string &what)
    {
        Message wire{};
        recv_all(reinterpret_cast<char *>(&wire), sizeof wire, what);
        const Message m = swap_numbers(wire);
        check_message(m, type, peer, what);
        return m;
    }
    /** @brief Send @p m (fields in host order). */
    void send_message(const Message &m)
    {
        const Message wire = swap_numbers(m);
        send_all(reinterpret_cast<const char *>(&wire), sizeof wire, "our " + type_name(m.type));
    }
    /** @brief What the peer said while we sent @p what (a refusal throws its reason), or that it closed:
     *  throws either way. */
    [[noreturn]] void throw_what_peer_says(const std::string &what)
    {
        recv_message(Type::refusal, what); // throws the reason, or why what came is not one
        throw Error(peer + " refused", "");
    }
    /** @brief The end: shut down our sending side (a FIN), then wait (-t) for @p peer to close its own;
     *  a byte it sends meanwhile breaks the protocol. @param what the step, for errors */
    void finish(const std::string &what)
    {
        shutdown(fd.get(), SHUT_WR);
        char extra = 0;
        if (recv_some(&extra, 1, what) != 0)
            throw Error(peer + " sent more after its last message", peer + " does not follow the protocol");
    }
    /** @brief Tell the peer why we stop (a refusal carrying @p e and its hint), then stop with that
     *  reason. What the peer sends meanwhile is read and dropped until it closes (at most -t): closing a
     *  socket with unread bytes would reset the connection, and the reset could destroy the refusal. */
    [[noreturn]] void refuse(const Error &e)
    {
        transfer = rdma_samples::Deadline(timeout_s); // -t of its own: --deadline may be what we refuse
        try {
            send_message(make_message(Type::refusal, std::string(e.what()) + "\n" + e.hint()));
            shutdown(fd.get(), SHUT_WR);
            char drop[16384];
            while (recv_some(drop, sizeof drop, peer + " to close the connection") != 0) {
            }
        } catch (const Error &) { // (a peer already gone: it learns why from its own side)
        }
        throw e;
    }
    /** @brief Do @p step; an Error it throws is refused (refuse()): the peer hears why we stop. */
    template <typename Step>
    auto refuse_on_error(Step step) -> decltype(step())
    {
        try {
            return step();
        } catch (const Error &e) {
            refuse(e);
        }
    }
};

} // namespace rdma_file_transfer::tcp
