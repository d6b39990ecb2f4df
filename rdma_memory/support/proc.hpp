/**
 * @file proc.hpp
 * @brief What rdma_memory_fork reads about its own pages from /proc (the smaps flag MADV_DONTFORK sets,
 * the physical frame under an address), and its bounded wait for the child. Nothing here is RDMA.
 */
#pragma once

#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace rdma_memory {

/** @brief Whether /proc/self/smaps marks the mapping that starts at @p addr "dc" (do not copy:
 *  MADV_DONTFORK). @param addr a mapping's first byte @return true when marked */
inline bool dont_fork(const void *addr)
{
    std::ifstream smaps("/proc/self/smaps");
    char start[32];
    std::snprintf(start, sizeof start, "%lx-", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(addr)));
    bool ours = false;
    for (std::string line; std::getline(smaps, line);) {
        if (line.starts_with(start))
            ours = true;
        else if (ours && line.starts_with("VmFlags:"))
            return (line + " ").find(" dc ") != std::string::npos;
    }
    return false;
}

/** @brief The physical page frame under @p addr, from /proc/self/pagemap.
 *  @param addr an address @return the frame number; 0 when not shown (it needs root) */
inline std::uint64_t page_frame(const void *addr)
{
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    // One 8-byte entry per virtual page: bit 63 "present", bits 0-54 the frame number.
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    std::uint64_t entry = 0;
    const ssize_t n =
        pread(fd, &entry, sizeof entry, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(addr) / page * 8));
    close(fd);
    return n == sizeof entry && (entry >> 63) != 0 ? entry & ((std::uint64_t{1} << 55) - 1) : 0;
}

/** @brief A page frame for the output. @param pfn from page_frame() @return it in hex, or why not shown */
inline std::string frame_text(std::uint64_t pfn)
{
    return pfn != 0 ? rdma_samples::hex(pfn) : std::string("not shown (reading page frames needs root)");
}

/** @brief Wait for the child at most @p timeout_s seconds; kill it after that.
 *  @param pid the child @param timeout_s -t @return its wait status @throws rdma_samples::Error on timeout */
inline int wait_child(pid_t pid, int timeout_s)
{
    const rdma_samples::Deadline deadline(timeout_s);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (deadline.expired()) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            throw rdma_samples::timeout_error(timeout_s, "the child to end",
                                              "the child was killed; raise -t on a slow machine");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status;
}

} // namespace rdma_memory
