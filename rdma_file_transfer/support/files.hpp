/**
 * @file files.hpp
 * @brief What both sides of rdma_file_transfer need that is not RDMA: SHA-256 (OpenSSL's EVP interface)
 * and the progress line; and the sender's source file with its checks. The receiver's file is
 * destination.hpp, its --keys file keys.hpp.
 */
#pragma once

#include "../protocol.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/text.hpp>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace rdma_file_transfer {

using rdma_samples::Error;
using rdma_samples::Fd;

/** @brief SHA-256 through OpenSSL's EVP interface (libcrypto), fed piece by piece. */
class Sha256 {
public:
    Sha256() : ctx_(EVP_MD_CTX_new())
    {
        if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
            throw Error("EVP_DigestInit_ex(SHA-256) failed", "OpenSSL's libcrypto could not start a SHA-256 digest");
    }
    /** @brief Hash @p n more bytes. @param p the bytes @param n how many */
    void update(const void *p, std::size_t n)
    {
        if (EVP_DigestUpdate(ctx_.get(), p, n) != 1)
            throw Error("EVP_DigestUpdate failed", "OpenSSL's libcrypto refused to hash");
    }
    /** @brief The digest of everything hashed. @return it */
    Digest final()
    {
        Digest d{};
        unsigned len = 0;
        if (EVP_DigestFinal_ex(ctx_.get(), d.data(), &len) != 1 || len != d.size())
            throw Error("EVP_DigestFinal_ex failed", "OpenSSL's libcrypto could not finish the digest");
        return d;
    }

private:
    struct Free {
        void operator()(EVP_MD_CTX *c) const { EVP_MD_CTX_free(c); }
    };
    std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

/** @brief The receiver's error when the SHA-256 of the bytes it got (@p computed) is not the one the
 *  sender announced with "done": nothing is kept. @return the error */
inline Error digest_mismatch(const Digest &computed, const Digest &announced)
{
    return Error("the data's SHA-256 is " + hex(computed) + ", the sender announced " + hex(announced),
                 "the data was damaged on the way, or the file changed while it was sent; nothing was kept");
}

/** @brief The file to send, open, with the size it had when opened. */
struct Source {
    Fd fd;              ///< open for reading
    std::uint64_t size; ///< st_size at open
    timespec mtime;     ///< st_mtim at open
    timespec ctime;     ///< st_ctim at open
};

/** @brief Open @p path for reading and refuse what cannot be sent: missing, unreadable, a directory,
 *  a FIFO or device (no length known up front). @param path FILE @return the open file */
inline Source open_source(const std::string &path)
{
    // O_NONBLOCK: opening a FIFO must not wait for a writer; we refuse it below.
    Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0)
        rdma_samples::fail_errno("open(" + rdma_samples::quote(path) + ")", errno,
                                 errno == ENOENT ? "check the path of the file to send"
                                                 : "the sender needs read permission on the file (ls -l)");
    struct stat st {};
    if (fstat(fd.get(), &st) != 0)
        rdma_samples::fail_errno("fstat(" + rdma_samples::quote(path) + ")", errno);
    if (S_ISDIR(st.st_mode))
        throw Error(rdma_samples::quote(path) + " is a directory", "send one file; pack a directory first (tar)");
    if (!S_ISREG(st.st_mode))
        throw Error(rdma_samples::quote(path) + " is not a regular file (a FIFO, socket or device)",
                    "the length goes out before the data (step 3): copy it into a regular file first");
    return {std::move(fd), static_cast<std::uint64_t>(st.st_size), st.st_mtim, st.st_ctim};
}

/** @brief Read up to @p len bytes at @p offset (fewer only at the end of the file).
 *  @return bytes read */
inline std::size_t read_at(int fd, char *buf, std::size_t len, std::uint64_t offset)
{
    std::size_t got = 0;
    while (got < len) {
        const ssize_t n = pread(fd, buf + got, len - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rdma_samples::fail_errno("pread", errno, "the file could not be read; check the disk");
        if (n == 0)
            break;
        got += static_cast<std::size_t>(n);
    }
    return got;
}

/** @brief Whether the file was written to since open_source(): its size, or its modification or
 *  status-change time, differs from what fstat() said then. The digest covers the bytes as they were
 *  read; this tells whether those are the file's bytes. @param src the open file @return true if changed */
inline bool changed_since_open(const Source &src)
{
    struct stat st {};
    if (fstat(src.fd.get(), &st) != 0)
        rdma_samples::fail_errno("fstat", errno);
    return static_cast<std::uint64_t>(st.st_size) != src.size || st.st_mtim.tv_sec != src.mtime.tv_sec ||
           st.st_mtim.tv_nsec != src.mtime.tv_nsec || st.st_ctim.tv_sec != src.ctime.tv_sec ||
           st.st_ctim.tv_nsec != src.ctime.tv_nsec;
}

/** @brief Why the file at @p path, open as @p src, is not the file whose @p sent bytes were hashed and
 *  sent: it shrank (fewer bytes than its size at open), it grew, or it was written to (changed_since_open()).
 *  @return the error for the receiver and for us, or nothing when it is the same file */
inline std::optional<Error> changed_while_sent(const Source &src, std::uint64_t sent, const std::string &path)
{
    char extra = 0;
    if (sent == src.size && read_at(src.fd.get(), &extra, 1, sent) == 0 && !changed_since_open(src))
        return std::nullopt;
    return Error(rdma_samples::quote(path) +
                     " changed while it was being sent (its size or modification time differs from step 1)",
                 "send a file nobody is writing to (a copy or a snapshot)");
}

/** @brief Bytes moved over time: a progress line on a terminal, one summary line at the end. */
class Progress {
public:
    /** @param total bytes to move @param verb "sent" or "received" */
    Progress(std::uint64_t total, const char *verb) : total_(total), verb_(verb), tty_(isatty(STDOUT_FILENO) == 1) {}
    /** @brief @p done bytes so far; redraws the terminal line at most 5 times a second. */
    void update(std::uint64_t done)
    {
        if (!tty_ || clock::now() - drawn_ < std::chrono::milliseconds(200))
            return;
        drawn_ = clock::now();
        const double s = seconds(), rate = s > 0 ? static_cast<double>(done) / s : 0;
        const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
        std::printf("\r\033[K%s %llu of %llu bytes, %3.0f%%, %.1f MB/s, %.0f s left ", verb_,
                    static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                    total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate / 1e6,
                    left);
        std::fflush(stdout);
    }
    /** @brief The summary: bytes, seconds, MB/s. */
    void finish()
    {
        const double s = seconds();
        std::printf("%s%s %llu bytes in %.2f s, %.1f MB/s\n", tty_ ? "\r\033[K" : "", verb_,
                    static_cast<unsigned long long>(total_), s, s > 0 ? static_cast<double>(total_) / s / 1e6 : 0.0);
    }

private:
    using clock = std::chrono::steady_clock;
    double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
    std::uint64_t total_;
    const char *verb_;
    bool tty_;
    clock::time_point start_ = clock::now(), drawn_{};
};

} // namespace rdma_file_transfer
