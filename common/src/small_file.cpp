/** @file small_file.cpp @brief A small text file read whole, bounded whatever sits at its path. */
#include <rdma_samples/small_file.hpp>
#include <rdma_samples/text.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace rdma_samples {

std::string read_small_file(const std::string &path, std::size_t max_bytes, const std::string &noun, bool &exists)
{
    exists = false;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return {};
        fail_errno("stat(" + quote(path) + ")", errno);
    }
    exists = true;
    if (S_ISDIR(st.st_mode))
        throw SmallFileError(path + ": is a directory, not a " + noun);
    if (!S_ISREG(st.st_mode))
        throw SmallFileError(path + ": is a " +
                             (S_ISFIFO(st.st_mode)   ? "FIFO"
                              : S_ISSOCK(st.st_mode) ? "socket"
                                                     : "device or special file") +
                             ", not a regular file; a " + noun + " is a small text file");
    const std::string too_large = path + ": is too large (";
    const std::string bound = "at most " + std::to_string(max_bytes) + " for a " + noun + ")";
    if (static_cast<std::size_t>(st.st_size) > max_bytes)
        throw SmallFileError(too_large + std::to_string(st.st_size) + " bytes; " + bound);
    // O_NONBLOCK: if the file was swapped for a FIFO after stat(), open() still returns at once.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) { // removed since stat(): not there
            exists = false;
            return {};
        }
        fail_errno("open(" + quote(path) + ")", errno);
    }
    std::string text(max_bytes + 1, '\0');
    std::size_t got = 0;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        while (got < text.size()) {
            const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
            if (n <= 0)
                break;
            got += static_cast<std::size_t>(n);
        }
    }
    ::close(fd);
    if (got > max_bytes) // it grew while we read it
        throw SmallFileError(too_large + "more than " + std::to_string(max_bytes) + " bytes; " + bound);
    text.resize(got);
    return text;
}

} // namespace rdma_samples
