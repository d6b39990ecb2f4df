/** @file descriptor_file.cpp @brief Descriptor files: bounded read, atomic write, the wait for the peer's. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/small_file.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace rdma_samples {

std::string read_descriptor_text(const std::string &path, bool &exists)
{
    try {
        return read_small_file(path, max_descriptor_size, "descriptor file", exists);
    } catch (const SmallFileError &e) {
        throw DescriptorError(e.what());
    }
}

void write_descriptor_file(const std::string &path, const std::string &text)
{
    // Write to a temporary name in the same folder, then rename: rename() within one file system is
    // atomic, so a peer polling for the file sees either nothing or all of it.
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fail_errno("open(\"" + tmp + "\")", errno);
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            fail_errno("write(\"" + tmp + "\")", err);
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail_errno("rename(\"" + tmp + "\", \"" + path + "\")", err);
    }
}

namespace {

/** Poll for @p w.path until it parses and answers the right nonce; then remove it and return it. */
template <typename D, typename Parse>
D wait_for(const WaitFor &w, Parse parse)
{
    info("waiting up to %d s for %s (written by %s)", w.timeout_s, w.path.c_str(), w.from.c_str());
    Waiter waiter(w.timeout_s, w.path + " from " + w.from,
                  "start " + w.from + " (it writes this file), or copy the file here from its machine; check -re/-m");
    std::string reported_stale;
    std::string last_bad;
    Deadline settle = Deadline::in_ms(500); // a malformed file must stay unchanged this long to count
    for (;;) {
        bool exists = false;
        const std::string text = read_descriptor_text(w.path, exists);
        if (exists) {
            try {
                D d = parse(text, w.path);
                if (w.answering && d.peer_nonce != w.answering) {
                    if (reported_stale != text) {
                        info("ignoring %s: it answers another run (peer_nonce %s, ours %s); waiting for a fresh one",
                             w.path.c_str(), d.peer_nonce ? hex(*d.peer_nonce, 16).c_str() : "none",
                             hex(*w.answering, 16).c_str());
                        reported_stale = text;
                    }
                } else {
                    // Consumed: remove it, so a later run cannot mistake it for its live peer's.
                    ::unlink(w.path.c_str());
                    return d;
                }
            } catch (const DescriptorError &) {
                // A copy may still be in progress: accept a malformed file only once it stops changing.
                if (text != last_bad) {
                    last_bad = text;
                    settle.restart();
                } else if (settle.expired()) {
                    throw;
                }
            }
        }
        waiter.pause();
    }
}

} // namespace

ConnectionDescriptor wait_for_connection_descriptor(const WaitFor &w)
{
    return wait_for<ConnectionDescriptor>(w, parse_connection_descriptor);
}

ResourceDescriptor wait_for_resource_descriptor(const WaitFor &w, ResourceKind kind)
{
    return wait_for<ResourceDescriptor>(
        w, [kind](const std::string &t, const std::string &s) { return parse_resource_descriptor(t, s, kind); });
}

UdDescriptor wait_for_ud_descriptor(const WaitFor &w)
{
    return wait_for<UdDescriptor>(w, parse_ud_descriptor);
}

std::string numbered_path(const std::string &path, int i)
{
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "-%04d", i);
    return path + suffix;
}

} // namespace rdma_samples
