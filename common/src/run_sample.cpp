/** @file run_sample.cpp @brief The life of main(): parse, run, report. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cstdio>

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
        std::fflush(stdout);
        std::fprintf(stderr, "%s: step %d: warning: %s\n", spec.role.c_str(), current_step(), e.what());
        if (!e.hint().empty())
            std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
        std::fprintf(stderr, "done, and it stands: %s\n", e.stands().c_str());
        result("Sample finished with a warning");
        return 3;
    } catch (const Error &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: step %d failed: %s\n", spec.role.c_str(), current_step(), e.what());
        if (!e.hint().empty())
            std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: step %d failed: %s\n", spec.role.c_str(), current_step(), e.what());
    }
    result("Sample finished with errors");
    return 1;
}

} // namespace rdma_samples
