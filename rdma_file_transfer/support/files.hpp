/**
 * @file files.hpp
 * @brief What rdma_file_transfer needs that is not RDMA: SHA-256 (OpenSSL's EVP interface), the
 * source file and its checks, a destination that appears only when complete, names, keys, progress.
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

#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

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

/** @brief What the temporary name adds to the final one: "." NAME "." up to 10 digits ".part". */
inline constexpr std::size_t temp_name_extra = 17;

/** @brief The longest name the receiver stores: its temporary name must fit NAME_MAX too. */
inline constexpr std::size_t max_name = NAME_MAX - temp_name_extra;

/** @brief Why @p name may not be used as a file name in the receiver's directory, or "" when it may.
 *  A name from the network is input, never a path: no /, no control bytes, and nothing that starts
 *  with . (a hidden file such as .profile or .bash_login, or . and ..) or - (read as a flag by the
 *  next tool that sees it). */
inline std::string bad_name(const std::string &name)
{
    if (name.empty())
        return "is empty";
    if (name[0] == '.' || name[0] == '-')
        return "starts with " + name.substr(0, 1) + " (hidden files and names that read as flags are refused)";
    if (name.size() > max_name)
        return "is " + std::to_string(name.size()) + " bytes; at most " + std::to_string(max_name) + " fit (NAME_MAX " +
               std::to_string(NAME_MAX) + ", less " + std::to_string(temp_name_extra) + " for the temporary name)";
    for (unsigned char c : name) {
        if (c == '/')
            return "contains /";
        if (c < 0x20 || c == 0x7f)
            return "contains a control byte";
    }
    return {};
}

/** @brief Where the file goes: -o @p out itself, or, when it is a directory, @p name in it.
 *  @throws Error when @p name cannot be a file name there (bad_name()) */
inline std::string destination(const std::string &out, const std::string &name)
{
    struct stat st {};
    if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        const std::string base = out.substr(out.rfind('/') + 1);
        if (base.size() > max_name)
            throw Error("-o " + rdma_samples::quote(out) + ": its last component is " + std::to_string(base.size()) +
                            " bytes; at most " + std::to_string(max_name) + " leave room for the temporary name",
                        "choose a shorter -o");
        return out;
    }
    if (const std::string why = bad_name(name); !why.empty())
        throw Error("the name " + rdma_samples::quote(name) + " " + why, "send it with another --name");
    return out + "/" + name;
}

/**
 * @brief The file being received: data goes to a temporary file in the destination's directory, and
 * only commit() gives it the final name. Anything else (an error, a lost peer) removes it.
 *
 * Where the file system has O_TMPFILE (ext4, xfs, btrfs, tmpfs), the temporary file has no name at
 * all: even a receiver killed with SIGKILL leaves nothing behind. Elsewhere it is ".NAME.XXXXXX".
 */
class PartFile {
public:
    /** @param dest the final path @param force whether an existing @p dest may be replaced */
    PartFile(std::string dest, bool force) : dest_(std::move(dest)), force_(force)
    {
        const std::size_t slash = dest_.rfind('/');
        dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : dest_.substr(0, slash);
        if (!force_ && access(dest_.c_str(), F_OK) == 0)
            throw Error(rdma_samples::quote(dest_) + " exists", "pass --force to replace it, or choose another -o");
        fd_ = open(dir_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
        if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
            tmp_ = temp_name();
            fd_ = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        }
        if (fd_ < 0)
            rdma_samples::fail_errno("creating a file in " + rdma_samples::quote(dir_), errno,
                                     "the receiver needs a directory it may write to; check -o and its permissions");
    }
    PartFile(const PartFile &) = delete;
    PartFile &operator=(const PartFile &) = delete;
    ~PartFile()
    {
        close(fd_);
        if (!committed_ && !tmp_.empty())
            unlink(tmp_.c_str());
    }
    /** @brief Append @p n bytes, all of them, or throw (ENOSPC: the disk is full). Writeback starts
     *  every flush_window bytes and waits for the window before, so that commit()'s fsync() has at most
     *  two windows to write, however large the file: the sender waits for the verdict only -t. */
    void write(const char *p, std::size_t n)
    {
        written_ += n;
        while (n > 0) {
            const ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                rdma_samples::fail_errno("write(" + rdma_samples::quote(dest_) + ")", errno,
                                         errno == ENOSPC || errno == EFBIG || errno == EDQUOT
                                             ? "free space on the receiver's disk (df " + dir_ +
                                                   ") or choose another -o"
                                             : "check the receiver's disk");
            p += w;
            n -= static_cast<std::size_t>(w);
        }
        if (written_ - started_ >= flush_window) {
            // (a file system without it, such as 9p or tmpfs, just returns; EINVAL or ENOSYS are fine too)
            // (a length of 0 would mean "to the end of the file": the first window has nothing before it)
            if (started_ > waited_ &&
                sync_file_range(fd_, static_cast<off_t>(waited_), static_cast<off_t>(started_ - waited_),
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) !=
                    0 &&
                errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
                rdma_samples::fail_errno("sync_file_range(" + rdma_samples::quote(dest_) + ")", errno,
                                         "check the receiver's disk");
            sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(written_ - started_),
                            SYNC_FILE_RANGE_WRITE);
            waited_ = started_;
            started_ = written_;
        }
    }
    /** @brief The data is good: make it durable (fsync), then give it its name (rename, or link the
     *  nameless file), then make the name durable (fsync of the directory). */
    void commit()
    {
        if (fsync(fd_) != 0)
            rdma_samples::fail_errno("fsync(" + rdma_samples::quote(dest_) + ")", errno, "check the receiver's disk");
        if (tmp_.empty()) { // nameless (O_TMPFILE): link it in under a temporary name first
            tmp_ = temp_name();
            const std::string self = "/proc/self/fd/" + std::to_string(fd_);
            if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp_.c_str(), AT_SYMLINK_FOLLOW) != 0)
                rdma_samples::fail_errno("linkat(" + rdma_samples::quote(tmp_) + ")", errno,
                                         "check the receiver's disk");
        }
        // Without --force, link() refuses an existing name (EEXIST), even one made since we checked.
        const int rc = force_ ? rename(tmp_.c_str(), dest_.c_str()) : link(tmp_.c_str(), dest_.c_str());
        if (rc != 0)
            rdma_samples::fail_errno((force_ ? "rename(" : "link(") + rdma_samples::quote(dest_) + ")", errno,
                                     errno == EEXIST ? "pass --force to replace it, or choose another -o"
                                                     : "check the receiver's disk");
        if (!force_)
            unlink(tmp_.c_str());
        committed_ = true;
        Fd dir(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dir.get() >= 0)
            fsync(dir.get());
    }

private:
    std::string temp_name() const
    {
        const std::size_t slash = dest_.rfind('/');
        const std::string base = slash == std::string::npos ? dest_ : dest_.substr(slash + 1);
        return dir_ + "/." + base + "." + std::to_string(std::random_device{}()) + ".part";
    }
    static constexpr std::uint64_t flush_window = 8 << 20; ///< bytes between two starts of writeback
    std::string dest_, dir_, tmp_;
    bool force_;
    int fd_ = -1;
    bool committed_ = false;
    std::uint64_t written_ = 0; ///< bytes appended
    std::uint64_t started_ = 0; ///< writeback started for [0, started_)
    std::uint64_t waited_ = 0;  ///< written to disk: [0, waited_)
};

/** @brief The receiver's --keys file: one "ID KEY" per line; blank lines and # comments skipped.
 *  @param path the file @return ID -> key */
inline std::map<std::string, std::string> load_keys(const std::string &path)
{
    std::ifstream in(path);
    if (!in)
        rdma_samples::fail_errno("open(" + rdma_samples::quote(path) + ")", errno, "check --keys");
    std::map<std::string, std::string> keys;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty() || line[0] == '#')
            continue;
        const std::size_t sp = line.find(' ');
        if (sp == 0 || sp == std::string::npos || sp + 1 == line.size())
            throw Error(path + ":" + std::to_string(n) + ": expected \"ID KEY\", got " + rdma_samples::quote(line),
                        "one ID and its key per line, separated by one space");
        keys[line.substr(0, sp)] = line.substr(sp + 1);
    }
    return keys;
}

/** @brief The answer to the sender's ID (workflow step 7): its key from --keys, a refusal of an ID
 *  not there, or, without --keys (@p keys empty), the receipt @p receipt naming the ID. */
inline ControlMessage answer_id(const std::map<std::string, std::string> &keys, const std::string &who,
                                const std::string &receipt)
{
    if (keys.empty())
        return make_message(MessageType::receipt, receipt + ", for " + who);
    if (const auto key = keys.find(who); key != keys.end())
        return make_message(MessageType::key, key->second);
    return make_message(MessageType::refusal, "unknown ID " + rdma_samples::quote(who) +
                                                  ": no key\nask the receiver's operator to add the ID to its --keys "
                                                  "file; the file itself arrived intact");
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
