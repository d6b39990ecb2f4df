/**
 * @file part_file.hpp
 * @brief The file rdma_file_receiver writes, which is not RDMA: it appears under its final name only
 * when complete and verified (PartFile), and nothing is left behind otherwise, a signal included.
 */
#pragma once

#include "destination.hpp"
#include "temp_name_on_signal.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/text.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

namespace rdma_file_transfer {

/**
 * @brief The file being received: data goes to a temporary file in the destination's directory, and
 * only commit() gives it the final name. Anything else (an error, a lost peer, a signal) removes it.
 *
 * The directory is opened once, here, and every later call works relative to it (openat(), linkat(),
 * renameat(), fsync()): a directory renamed or replaced during the transfer cannot redirect the file.
 * Where the file system has O_TMPFILE (ext4, xfs, btrfs, tmpfs), the temporary file has no name at
 * all, and without --force it is linked straight to its final name: even a receiver killed with SIGKILL
 * leaves nothing behind. Elsewhere (9p, NFS, CIFS, vfat) it is ".NAME.NNNN.part" until commit().
 */
class PartFile {
public:
    /** @param dest where the file goes @param force whether an existing file there may be replaced */
    PartFile(Destination dest, bool force)
        : dest_(std::move(dest)), force_(force), dir_(open(dest_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC))
    {
        if (dir_.get() < 0)
            rdma_samples::fail_errno("opening the directory " + quoted(dest_.dir), errno,
                                     "the receiver needs a directory it may write to; check -o and its permissions");
        struct stat st {}; // the name itself, not what a symbolic link there points to
        if (fstatat(dir_.get(), dest_.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!force_)
                throw Error(quoted(dest_.path()) + " exists" + (S_ISLNK(st.st_mode) ? " (a symbolic link)" : ""),
                            "pass --force to replace it, or choose another -o");
            if (S_ISDIR(st.st_mode))
                throw Error(quoted(dest_.path()) + " is a directory",
                            "--force replaces a file, not a directory: choose another -o");
        }
        fd_ = openat(dir_.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
        if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
            name_temp();
            fd_ = openat(dir_.get(), tmp_->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        }
        if (fd_ < 0)
            rdma_samples::fail_errno("creating a file in " + quoted(dest_.dir), errno,
                                     "the receiver needs a directory it may write to; check -o and its permissions");
    }
    PartFile(const PartFile &) = delete;
    PartFile &operator=(const PartFile &) = delete;
    ~PartFile()
    {
        close(fd_);
        if (tmp_) // not committed: the temporary file goes
            unlinkat(dir_.get(), tmp_->c_str(), 0);
    }
    /** @brief Refuse an offer of @p length bytes that --max-size (@p max_size) forbids or the file
     *  system has no room for, before a byte is written. @throws Error naming both figures */
    void check_room(std::uint64_t length, std::uint64_t max_size) const
    {
        const std::string offer = "the offer is " + std::to_string(length) + " bytes";
        if (length > max_size)
            throw Error(offer + "; --max-size is " + std::to_string(max_size),
                        "send a smaller file, or raise the receiver's --max-size");
        struct statvfs fs {};
        if (fstatvfs(fd_, &fs) != 0)
            rdma_samples::fail_errno("fstatvfs(" + quoted(dest_.dir) + ")", errno, "check the receiver's disk");
        const std::uint64_t room = std::uint64_t{fs.f_bavail} * fs.f_frsize;
        if (length > room)
            throw Error(offer + "; " + quoted(dest_.dir) + " has " + std::to_string(room) + " bytes free",
                        "free space on the receiver's disk (df " + dest_.dir + ") or choose another -o");
    }
    /** @brief Append @p n bytes, all of them, or throw (ENOSPC: the disk is full). */
    void write(const char *p, std::size_t n);
    /** @brief The data is good: make it durable (fsync), then give it its name, then make the name
     *  durable (fsync of the directory). Without --force, a name that appeared since the check is
     *  refused (link() never replaces); with it, rename() replaces it in one step. */
    void commit()
    {
        if (fsync(fd_) != 0)
            fail_at("fsync", dest_.path());
        if (!tmp_ && !force_) { // nameless (O_TMPFILE): link it in under its final name
            link_fd(dest_.name);
        } else {
            if (!tmp_) { // nameless, and replacing: a temporary name first, so that rename() replaces
                name_temp();
                link_fd(*tmp_);
            }
            const int rc = force_ ? renameat(dir_.get(), tmp_->c_str(), dir_.get(), dest_.name.c_str())
                                  : linkat(dir_.get(), tmp_->c_str(), dir_.get(), dest_.name.c_str(), 0);
            if (rc != 0)
                fail_at(force_ ? "rename" : "link", dest_.path());
            if (!force_)
                unlinkat(dir_.get(), tmp_->c_str(), 0);
            tmp_.reset(); // committed: the file has its final name, nothing temporary is left
            on_signal_.set(-1, nullptr);
        }
        fsync(dir_.get());
    }

private:
    /** The nameless file's link as @p name in the directory (linkat() of /proc/self/fd/N, which an
     *  unprivileged process may do). */
    void link_fd(const std::string &name)
    {
        const std::string self = "/proc/self/fd/" + std::to_string(fd_);
        if (linkat(AT_FDCWD, self.c_str(), dir_.get(), name.c_str(), AT_SYMLINK_FOLLOW) != 0)
            fail_at("linkat", dest_.dir + "/" + name);
    }
    /** A local path (-o's, and a checked name in it) for a message: quoted, but not cut short. */
    static std::string quoted(const std::string &path) { return rdma_samples::quote(path, PATH_MAX); }
    [[noreturn]] static void fail_at(const char *call, const std::string &path)
    {
        const int e = errno;
        rdma_samples::fail_errno(std::string(call) + "(" + quoted(path) + ")", e,
                                 e == EEXIST ? "pass --force to replace it, or choose another -o"
                                             : "check the receiver's disk");
    }
    /** Choose the temporary name ".NAME.NNNN.part" (temp_name_extra bytes longer than NAME), and have
     *  a signal remove it from now on. */
    void name_temp()
    {
        tmp_ = "." + dest_.name + "." + std::to_string(std::random_device{}()) + ".part";
        on_signal_.set(dir_.get(), tmp_->c_str());
    }
    static constexpr std::uint64_t flush_window = 8 << 20; ///< bytes between two starts of writeback
    Destination dest_;
    bool force_;
    rdma_samples::Fd dir_;           ///< the directory, opened once
    TempNameOnSignal on_signal_;     ///< (declared after dir_: gone, with its name, before dir_ closes)
    std::optional<std::string> tmp_; ///< the temporary name, while there is one (none: O_TMPFILE's, or committed)
    int fd_ = -1;
    std::uint64_t written_ = 0; ///< bytes appended
    std::uint64_t started_ = 0; ///< writeback started for [0, started_)
    std::uint64_t waited_ = 0;  ///< written to disk: [0, waited_)
};

/** Writeback starts every flush_window bytes and waits for the window before, so that commit()'s fsync()
 *  has at most two windows to write, however large the file: the sender waits for the verdict only -t. */
inline void PartFile::write(const char *p, std::size_t n)
{
    written_ += n;
    while (n > 0) {
        const ssize_t w = ::write(fd_, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            rdma_samples::fail_errno("write(" + quoted(dest_.path()) + ")", errno,
                                     errno == ENOSPC || errno == EFBIG || errno == EDQUOT
                                         ? "free space on the receiver's disk (df " + dest_.dir +
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
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0 &&
            errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            rdma_samples::fail_errno("sync_file_range(" + quoted(dest_.path()) + ")", errno,
                                     "check the receiver's disk");
        sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(written_ - started_),
                        SYNC_FILE_RANGE_WRITE);
        waited_ = started_;
        started_ = written_;
    }
}

} // namespace rdma_file_transfer
