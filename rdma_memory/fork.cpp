/**
 * @file fork.cpp
 * @brief What fork() does to registered memory, with and without ibv_fork_init().
 *
 * A memory region maps physical pages: the device reads and writes those pages, whatever the process's
 * page tables say later. fork() makes the child share the parent's pages copy-on-write, and the first
 * write afterwards copies a page. Before Linux 5.9 that could be the parent's write: the parent got a
 * new page and the device kept the old one, now the child's, so the parent's data and the device's no
 * longer met. ibv_fork_init() was the cure: every registration marks its pages MADV_DONTFORK, so the
 * child gets no mapping there at all (touching it kills the child with SIGSEGV). Since 5.9 (5.12 for
 * huge pages) the kernel copies a pinned page for the child at fork() time instead, the parent keeps the
 * page the device maps; since 5.13 the kernel says so, and ibv_is_fork_initialized() returns
 * IBV_FORK_UNNEEDED.
 *
 * Neither makes fork() safe for verbs: the child must not use the parent's context, PD, MR, QP or CQ
 * (they are the parent's, opened on the parent's file of /dev/infiniband/uverbsN). fork-friendly, not
 * fork-safe: a child that needs RDMA opens the device itself, or exec()s.
 */
#include "support/mapping.hpp"
#include "support/options.hpp"
#include "support/proc.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/verbs.hpp>

#include <fcntl.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>

using namespace rdma_samples;

namespace rdma_memory { // Mapping, the /proc readers, wait_child, ForkOptions (support/)
namespace {

constexpr const char parent_text[] = "Hi RDMA! (the parent's bytes)";
constexpr const char child_text[] = "the child's bytes";

/** ibv_is_fork_initialized()'s answer, and what it means for registered memory. */
const char *fork_status_text(ibv_fork_status status)
{
    switch (status) {
    case IBV_FORK_DISABLED:
        return "IBV_FORK_DISABLED: no ibv_fork_init() and a kernel that does not copy pinned pages on fork: "
               "the parent's first write after fork() can move its data off the pages the device maps";
    case IBV_FORK_ENABLED:
        return "IBV_FORK_ENABLED: ibv_fork_init() was called on a kernel that does not copy pinned pages: "
               "registered pages are MADV_DONTFORK, absent from the child";
    case IBV_FORK_UNNEEDED:
        return "IBV_FORK_UNNEEDED: the kernel copies pinned pages for the child at fork() (since Linux 5.9, 5.12 "
               "for huge pages; it says so since 5.13): the parent keeps the pages the device maps";
    }
    return "unknown";
}

/** The child: read the registered page, report it through @p report, write into the page. No verbs. */
[[noreturn]] void child(char *buf, std::size_t len, int report)
{
    // Let a fault end the child with the signal itself, even where a runtime (AddressSanitizer, a
    // debugger) installed its own SIGSEGV handler: the parent reports the signal.
    std::signal(SIGSEGV, SIG_DFL);
    std::string seen = "read:";
    seen.append(buf, strnlen(buf, len)); // with MADV_DONTFORK, this read is the fault
    seen += '\n';
    std::memcpy(buf, child_text, sizeof child_text);
    seen += "wrote\n";
    const ssize_t n = write(report, seen.data(), seen.size());
    _exit(n == static_cast<ssize_t>(seen.size()) ? 0 : 3);
}

void run(const Args &args, const ForkOptions &opt)
{
    if (opt.fork_init) {
        step(1, "call ibv_fork_init() before any other verbs call");
        // After the first registration it is too late (EINVAL): pages registered earlier were not marked.
        check_rc(ibv_fork_init(), "ibv_fork_init");
        info("ibv_fork_init() = 0");
    } else {
        step(1, "leave fork support as it is: no ibv_fork_init() (--fork-init calls it)");
    }

    step(2, "ask libibverbs what fork() will do to registered memory: ibv_is_fork_initialized()");
    result("%s", fork_status_text(ibv_is_fork_initialized()));

    step(3, "open a device, register one page holding \"%s\"", parent_text);
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    Mapping buf(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), false);
    std::memcpy(buf.data(), parent_text, sizeof parent_text);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    const std::uint64_t frame = page_frame(buf.data());
    info("MR addr %p, length %zu, lkey 0x%x; page frame %s", static_cast<void *>(buf.data()), buf.size(), mr->lkey,
         frame_text(frame).c_str());
    result("The registered page is %s", dont_fork(buf.data())
                                            ? "MADV_DONTFORK (VmFlags dc in /proc/self/smaps): fork() leaves it out of "
                                              "the child"
                                            : "inherited by a child (no dc in its VmFlags in /proc/self/smaps)");

    step(4, "fork() a child that reads the registered page and writes into it; it uses no verbs object");
    // The pipe carries what the child saw back to the parent. The child must not touch dev, pd or mr:
    // they belong to the parent's open device (fork-friendly, not fork-safe).
    //! [fork]
    int fds[2];
    check_rc(pipe2(fds, O_CLOEXEC), "pipe2");
    Fd report_read(fds[0]);  // the parent's end: what the child saw
    Fd report_write(fds[1]); // the child's end
    const pid_t pid = fork();
    if (pid < 0)
        fail_errno("fork", errno); // both ends close as the error leaves run()
    if (pid == 0) {
        report_read.reset();
        child(buf.data(), buf.size(), report_write.get());
    }
    report_write.reset(); // only the child writes: its exit is then the pipe's end of file
    //! [fork]

    step(5, "wait for the child (at most %d s) and read what it saw", args.timeout_s);
    const int status = wait_child(pid, args.timeout_s);
    char report[512] = {};
    const ssize_t n = read(report_read.get(), report, sizeof report - 1);
    const std::string said(report, n > 0 ? static_cast<std::size_t>(n) : 0);
    const std::size_t nl = said.find('\n');
    if (said.starts_with("read:") && nl != std::string::npos)
        result("Child read from the registered page: %s", quote(said.substr(5, nl - 5)).c_str());
    if (said.find("\nwrote\n") != std::string::npos)
        result("Child wrote %s into its copy of the page", quote(child_text).c_str());
    if (WIFSIGNALED(status))
        result("Child killed by signal %d (%s) when it read the registered page", WTERMSIG(status),
               sigabbrev_np(WTERMSIG(status)) != nullptr ? sigabbrev_np(WTERMSIG(status)) : "?");
    else
        info("child exited with status %d", WEXITSTATUS(status));

    step(6, "check the parent's registered bytes, then write to them: does the MR still map the parent's page?");
    const bool unchanged = std::memcmp(buf.data(), parent_text, sizeof parent_text) == 0;
    const bool child_wrote = said.find("\nwrote\n") != std::string::npos;
    result("Parent's registered bytes: %s (%s)",
           quote(std::string(buf.data(), strnlen(buf.data(), buf.size()))).c_str(),
           !unchanged    ? "CHANGED by the child"
           : child_wrote ? "unchanged: the child wrote to a copy of its own"
                         : "unchanged");
    buf.data()[0] = 'h'; // the write that, before Linux 5.9 and without ibv_fork_init(), moved the parent
    const std::uint64_t after = page_frame(buf.data());
    info("page frame after the parent's write: %s%s", frame_text(after).c_str(),
         frame != 0 && after == frame ? " (the same page: the device and the parent still meet)" : "");
    result("The child must not use the parent's verbs objects (context, PD, MR, QP, CQ): fork-friendly, not "
           "fork-safe");

    if (!unchanged)
        throw Error("the child's write reached the parent's registered page",
                    "the parent and the child share the page; the kernel did not copy it on fork");
    if (WIFSIGNALED(status))
        throw Error(std::string("the child was killed by ") + sigabbrev_np(WTERMSIG(status)) +
                        " when it read the registered page",
                    dont_fork(buf.data())
                        ? "ibv_fork_init() marked the registered page MADV_DONTFORK: fork() left it out of the child, "
                          "where the address is unmapped; a child must not touch registered memory (rdma-core 51 and "
                          "later skip the marking when the kernel copies on fork)"
                        : "the child died on its own; run it under a debugger");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error("the child ended with status " + std::to_string(WEXITSTATUS(status)),
                    "the child could not report through its pipe");
}

} // namespace
} // namespace rdma_memory

int main(int argc, char **argv)
{
    rdma_memory::ForkOptions opt;
    ProgramSpec spec{.name = "rdma_memory_fork",
                     .role = "fork",
                     .summary = "What fork() does to registered memory: the child's view, the parent's bytes.",
                     .resource_descriptor = false,
                     .descriptor_files = false};
    spec.extra = opt.flags();
    return run_sample(spec, argc, argv, [&](const Args &args) { rdma_memory::run(args, opt); });
}
