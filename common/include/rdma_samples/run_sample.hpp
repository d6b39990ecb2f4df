/**
 * @file run_sample.hpp
 * @brief The life of every program's main(): parse the command line, run the lesson, report.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>

#include <functional>
#include <string>
#include <utility>

namespace rdma_samples {

/**
 * @brief A failure after the lesson's result was reached, which does not undo it: rdma_file_receiver's
 * file verified and kept, then a sender that never disconnects. run_sample() reports it as a warning,
 * with what stands, and exits with status 3, so that neither a person nor a script reads it as a
 * failure of the whole, or as a success without a word.
 */
class DoneWithWarning : public Error {
public:
    /** @param e what failed afterwards, and its hint @param stands what was done and still holds */
    DoneWithWarning(const Error &e, std::string stands) : Error(e.what(), e.hint()), stands_(std::move(stands)) {}
    /** @brief What was done and still holds. @return it, one line */
    const std::string &stands() const { return stands_; }

private:
    std::string stands_;
};

/**
 * @brief Run @p rest, the steps after a result that stands (@p stands, one line): an Error it throws
 * becomes a DoneWithWarning, reported as such by run_sample().
 * @param stands what was done and holds whatever follows @param rest the steps after it
 */
template <typename Rest>
void after_result(const std::string &stands, Rest rest)
{
    try {
        rest();
    } catch (const DoneWithWarning &) {
        throw;
    } catch (const Error &e) {
        throw DoneWithWarning(e, stands);
    }
}

/**
 * @brief The whole life of a sample's main(): parse, run, report.
 *
 * Prints the usage for -h (exit 0); a bad command line as one line on stderr, and its hint if it has
 * one (exit 2), also when the lesson finds it while running (a limit only the device knows); runs
 * @p run, and on an Error prints "<role>: step N failed: ..." and its hint on stderr. The last line on
 * stdout is "Sample finished successfully" (exit 0) or "Sample finished with errors" (exit 1); after a
 * DoneWithWarning, "<role>: step N: warning: ...", its hint and "done, and it stands: ..." on stderr,
 * and "Sample finished with a warning" (exit 3).
 * @param spec the program's flags
 * @param argc,argv as given to main()
 * @param run  the lesson
 * @return the process exit status
 */
int run_sample(const ProgramSpec &spec, int argc, char **argv, const std::function<void(const Args &)> &run);

} // namespace rdma_samples
