/** @file log.cpp @brief Steps, details and traces on stdout. */
#include <rdma_samples/log.hpp>
#include <rdma_samples/test_control.hpp>

#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace rdma_samples {

namespace {
int g_step = 0;
bool g_verbose = false;

void vprint(const char *prefix, const char *fmt, va_list ap)
{
    std::fputs(prefix, stdout);
    std::vprintf(fmt, ap);
    std::fputc('\n', stdout);
    // Flush every line: the peer (or a test) often waits for exactly this output.
    std::fflush(stdout);
}

// The step_times test hook: the step's line, after the time it was announced, appended to the hook's
// file (./lab trace --json lines the steps up with the packets: the capture's clock is the same).
void log_step_time(const timespec &when, const char *prefix, const char *fmt, va_list ap)
{
    const char *path = test_control(TestHook::step_times);
    if (path == nullptr || *path == '\0')
        return;
    std::FILE *f = std::fopen(path, "a");
    if (f == nullptr)
        return; // (a trace without the steps beside its packets; the lesson goes on)
    std::fprintf(f, "%lld.%09ld %s", static_cast<long long>(when.tv_sec), when.tv_nsec, prefix);
    std::vfprintf(f, fmt, ap);
    std::fputc('\n', f);
    std::fclose(f);
}
} // namespace

void step(int n, const char *fmt, ...)
{
    g_step = n;
    timespec when{};
    clock_gettime(CLOCK_REALTIME, &when);
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "step %d: ", n);
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    vprint(prefix, fmt, ap);
    log_step_time(when, prefix, fmt, again);
    va_end(again);
    va_end(ap);
    // Fault injection for the tests (tests/stress/stress --kill): stop here, at the start of step n, so
    // that the test can kill this process at exactly this point of the lesson.
    static const int stop_at = test_control_int(TestHook::stop_at_step, 0);
    if (stop_at == n)
        std::raise(SIGSTOP);
}

void info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("        ", fmt, ap);
    va_end(ap);
}

void result(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("", fmt, ap);
    va_end(ap);
}

void trace(const char *fmt, ...)
{
    if (!g_verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprint("  [verbs] ", fmt, ap);
    va_end(ap);
}

int current_step()
{
    return g_step;
}
void set_verbose(bool on)
{
    g_verbose = on;
}
bool verbose()
{
    return g_verbose;
}

} // namespace rdma_samples
