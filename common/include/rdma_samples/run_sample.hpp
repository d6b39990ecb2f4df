/**
 * @file run_sample.hpp
 * @brief The life of every program's main(): parse the command line, run the lesson, report.
 */
#pragma once

#include <rdma_samples/args.hpp>

#include <functional>

namespace rdma_samples {

/**
 * @brief The whole life of a sample's main(): parse, run, report.
 *
 * Prints the usage for -h (exit 0); a bad command line as one line on stderr, and its hint if it has
 * one (exit 2), also when the lesson finds it while running (a limit only the device knows); runs
 * @p run, and on an Error prints "<role>: step N failed: ..." and its hint on stderr. The last line on
 * stdout is "Sample finished successfully" (exit 0) or "Sample finished with errors" (exit 1).
 * @param spec the program's flags
 * @param argc,argv as given to main()
 * @param run  the lesson
 * @return the process exit status
 */
int run_sample(const ProgramSpec &spec, int argc, char **argv, const std::function<void(const Args &)> &run);

} // namespace rdma_samples
