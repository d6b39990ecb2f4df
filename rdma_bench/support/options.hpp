/**
 * @file options.hpp
 * @brief rdma_bench's own flags (the knobs), their defaults and their checks, the flags of each QP (-q),
 * the steps' wording, and the life of main().
 *
 * Both sides of the pair take the same flags, as perftest's server and client do: the responder needs
 * the operation, the measurement, the sizes and the counts to serve the requester. Names follow
 * perftest's long options where the DOCA flags the samples already take do not collide (`-s`, `-t` are
 * DOCA's: here they are `--size`, `--iters`, `--tx-depth`).
 */
#pragma once

#include <rdma_samples/args.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rdma_bench {

/** @brief The operation measured. */
enum class Op { write, read, send, write_imm, atomic };
/** @brief The measurement: bandwidth and message rate (perftest's _bw) or latency (_lat). */
enum class Mode { bw, lat };

/** @brief The largest message, and so the size of the memory region each side registers per QP. */
inline constexpr std::uint32_t max_size = 8u << 20; // perftest -a goes to 8 MiB
/** @brief The most queue pairs -q takes: each has its own slice of memory, up to max_size, on both sides. */
inline constexpr std::uint32_t max_qps = 16;

/** @brief Every knob, after defaults are filled in by finish(). */
struct Options {
    Op op = Op::write;              ///< --op
    Mode mode = Mode::bw;           ///< --mode
    std::uint32_t size = 0;         ///< --size (0 until finish(): 65536 for bw, 2 for lat, 8 for atomics)
    bool all_sizes = false;         ///< --all: 2, 4, ... 8 MiB (perftest -a)
    std::uint32_t iters = 1000;     ///< --iters: timed operations per size (and per QP)
    std::uint32_t qps = 1;          ///< -q, --qps: queue pairs sharing the CQ (bandwidth only; perftest -q)
    std::uint32_t duration_s = 0;   ///< --duration: repeat --iters rounds for at least this long (0: once)
    std::int64_t warmup = -1;       ///< --warmup: untimed operations before them (-1: iters / 10)
    std::uint32_t tx_depth = 0;     ///< --tx-depth: send work requests outstanding (0: 128 bw, 1 lat)
    std::uint32_t rx_depth = 512;   ///< --rx-depth: receives posted ahead (SEND, WRITE with immediate)
    std::uint32_t cq_mod = 0;       ///< --cq-mod: signal every N-th send (0: min(100, depth) bw, 1 lat)
    std::int64_t inline_size = -1;  ///< --inline-size: largest message sent inline (-1: 0 bw, 220 lat)
    std::uint32_t post_list = 1;    ///< --post-list: work requests per ibv_post_send() call
    std::uint32_t poll_batch = 16;  ///< --poll-batch: completions taken per ibv_poll_cq() call
    bool events = false;            ///< --events: sleep on a completion channel instead of busy polling
    bool cas = false;               ///< --atomic cas: compare-and-swap instead of fetch-and-add
    bool extended = false;          ///< --api extended: post with ibv_wr_*() (perftest's default), not ibv_post_send()
    bool yield = true;              ///< busy polling yields every 1024 empty polls (--no-yield: never)
    bool csv = false;               ///< --output csv: the result rows comma-separated, for scripts
    bool verify = false;            ///< --verify: check the data after the run
    bool explicit_tx_depth = false; ///< --tx-depth was given
    bool explicit_cq_mod = false;   ///< --cq-mod was given
    bool explicit_atomic = false;   ///< --atomic was given

    /** @brief The sizes to measure, smallest first.
     *  @return one size, or every power of two from 2 to max_size */
    std::vector<std::uint32_t> sizes() const;
    /** @brief Operations per size, warm-up included.
     *  @return warmup + iters */
    std::uint64_t per_size() const { return static_cast<std::uint64_t>(warmup) + iters; }
    /** @brief Whether the responder writes into the requester's landing region: the answers of a WRITE
     *  (or WRITE with immediate) ping-pong. Only then does that region grant remote write.
     *  @return true for --mode lat with --op write or write_imm */
    bool answers_by_write() const { return mode == Mode::lat && (op == Op::write || op == Op::write_imm); }
};

/** @brief The operation's name as --op takes it. @param op the operation @return e.g. "write_imm" */
const char *op_name(Op op);

/** @brief A knob the device or the other knobs cannot take: a usage error (exit 2) with a hint. */
using KnobError = rdma_samples::UsageError;

/**
 * @brief Add the knobs to @p spec as --flags that fill @p opt.
 * @param spec the program's flags
 * @param opt  filled in as the flags are parsed; must outlive the parse
 */
void add_bench_flags(rdma_samples::ProgramSpec &spec, Options &opt);

/** @brief Fill in the defaults and check the knobs against each other. @param opt the knobs
 *  @throws KnobError */
void finish(Options &opt);

/**
 * @brief The flags of QP @p i's exchange. With -q 1 they are the ones given; with more, each QP
 * exchanges its own connection descriptors through numbered files (`<-ld>-0000`, `<-re>-0001`, ...),
 * as rdma_multi_conn's connections do, and with `-cm` QP i connects on port `-lp` + i: a listener of
 * its own, so no QP's connection request can reach the listener of another (the server would have to
 * reject it). The resource descriptor (-m) is QP 0's alone.
 * @param args the flags given
 * @param i    the QP's index
 * @param qps  how many QPs (-q)
 * @return the flags for QP @p i
 * @throws KnobError when `-lp` + i is beyond the last port, 65535
 */
rdma_samples::Args args_for_qp(const rdma_samples::Args &args, std::uint32_t i, std::uint32_t qps);

/** @brief The QPs of step 3, as the output names them. @param opt the knobs
 *  @return "a QP", or e.g. "4 QPs on it" (-q 4: they share the CQ) */
std::string qps_text(const Options &opt);

/** @brief The requester's connection step, with how the -q QPs connect. @param args the flags
 *  @param opt the knobs @return e.g. "exchange descriptors with the responder and move the QP to RTS" */
std::string requester_connect_text(const rdma_samples::Args &args, const Options &opt);
/** @brief The responder's connection step. @param args the flags @return e.g. "wait for the requester, ..." */
std::string responder_connect_text(const rdma_samples::Args &args);

/** @brief The measuring step's line: the operation, the counts and the knobs of the loop.
 *  @param opt the knobs @return e.g. "measure write bandwidth: 1000 iterations per size after ..." */
std::string measure_text(const Options &opt);

/**
 * @brief The life of both sides' main(): parse the common flags and the knobs, fill in the defaults and
 * check them (a usage error, exit status 2, before any device is opened), then run the lesson.
 * @param spec the program's name, role and summary
 * @param argc,argv the command line
 * @param run  the lesson
 * @return the exit status
 */
int bench_main(rdma_samples::ProgramSpec spec, int argc, char **argv,
               void (*run)(const rdma_samples::Args &, const Options &));

} // namespace rdma_bench
