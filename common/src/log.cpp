/** @file log.cpp @brief Steps, details and traces on stdout. */
#include <rdma_samples/log.hpp>
#include <rdma_samples/test_control.hpp>

#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

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
} // namespace

void step(int n, const char *fmt, ...)
{
    g_step = n;
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "step %d: ", n);
    va_list ap;
    va_start(ap, fmt);
    vprint(prefix, fmt, ap);
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
