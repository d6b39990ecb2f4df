/** @file run_sample.cpp @brief The life of main(): parse, run, report. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cstdio>
#include <string>

namespace rdma_samples {

namespace {

int usage_error(const ProgramSpec &spec, const UsageError &e)
{
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(), e.what());
    if (!e.hint().empty())
        std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
    return 2;
}

/** "<role>: step N failed: WHAT" (@p how " failed"), or "<role>: step N: warning: WHAT" (@p how
 *  ": warning"), then the hint, if any, on stderr, after what stdout holds. */
void report_step(const ProgramSpec &spec, const char *how, const char *what, const std::string &hint = {})
{
    std::fflush(stdout);
    std::fprintf(stderr, "%s: step %d%s: %s\n", spec.role.c_str(), current_step(), how, what);
    if (!hint.empty())
        std::fprintf(stderr, "hint: %s\n", hint.c_str());
}

} // namespace

int run_sample(const ProgramSpec &spec, int argc, char **argv, const std::function<void(const Args &)> &run)
{
    Args args;
    try {
        args = parse_args(spec, argc, argv);
    } catch (const UsageError &e) {
        return usage_error(spec, e);
    }
    if (args.help) {
        std::fputs(usage(spec).c_str(), stdout);
        return 0;
    }
    set_verbose(args.verbose);
    try {
        run(args);
        result("Sample finished successfully");
        return 0;
    } catch (const UsageError &e) {
        return usage_error(spec, e); // a value only the device could refuse
    } catch (const DoneWithWarning &e) {
        report_step(spec, ": warning", e.what(), e.hint());
        std::fprintf(stderr, "done, and it stands: %s\n", e.stands().c_str());
        result("Sample finished with a warning");
        return 3;
    } catch (const Error &e) {
        report_step(spec, " failed", e.what(), e.hint());
    } catch (const std::exception &e) {
        report_step(spec, " failed", e.what());
    }
    result("Sample finished with errors");
    return 1;
}

} // namespace rdma_samples
