/**
 * @file destination.hpp
 * @brief Where rdma_file_receiver stores the file, which is not RDMA: the sender's name checked as a
 * file name (bad_name()), the path it goes to (destination()), and a file that appears under that path
 * only when complete and verified (PartFile).
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/text.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>

namespace rdma_file_transfer {

using rdma_samples::Error;
using rdma_samples::Fd;

/** @brief What the temporary name adds to the final one: "." NAME "." up to 10 digits ".part". */
inline constexpr std::size_t temp_name_extra = 17;

/** @brief The longest name the receiver stores: its temporary name must fit NAME_MAX too. */
inline constexpr std::size_t max_name = NAME_MAX - temp_name_extra;

/** @brief Why @p name may not be used as a file name in the receiver's directory; nothing when it may.
 *  A name from the network is input, never a path: no /, no control bytes, and nothing that starts
 *  with . (a hidden file such as .profile or .bash_login, or . and ..) or - (read as a flag by the
 *  next tool that sees it). */
inline std::optional<std::string> bad_name(const std::string &name)
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
    return std::nullopt;
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
    if (const std::optional<std::string> why = bad_name(name))
        throw Error("the name " + rdma_samples::quote(name) + " " + *why, "send it with another --name");
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
            fd_ = open(tmp_->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
        if (tmp_) // not committed: the temporary file goes
            unlink(tmp_->c_str());
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
        if (!tmp_) { // nameless (O_TMPFILE): link it in under a temporary name first
            tmp_ = temp_name();
            const std::string self = "/proc/self/fd/" + std::to_string(fd_);
            if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp_->c_str(), AT_SYMLINK_FOLLOW) != 0)
                rdma_samples::fail_errno("linkat(" + rdma_samples::quote(*tmp_) + ")", errno,
                                         "check the receiver's disk");
        }
        // Without --force, link() refuses an existing name (EEXIST), even one made since we checked.
        const int rc = force_ ? rename(tmp_->c_str(), dest_.c_str()) : link(tmp_->c_str(), dest_.c_str());
        if (rc != 0)
            rdma_samples::fail_errno((force_ ? "rename(" : "link(") + rdma_samples::quote(dest_) + ")", errno,
                                     errno == EEXIST ? "pass --force to replace it, or choose another -o"
                                                     : "check the receiver's disk");
        if (!force_)
            unlink(tmp_->c_str());
        tmp_.reset(); // committed: the file has its final name, nothing temporary is left
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
    std::string dest_, dir_;
    std::optional<std::string> tmp_; ///< the temporary name, while there is one (none: O_TMPFILE's, or committed)
    bool force_;
    int fd_ = -1;
    std::uint64_t written_ = 0; ///< bytes appended
    std::uint64_t started_ = 0; ///< writeback started for [0, started_)
    std::uint64_t waited_ = 0;  ///< written to disk: [0, waited_)
};

} // namespace rdma_file_transfer
