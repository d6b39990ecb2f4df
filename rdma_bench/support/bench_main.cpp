/** @file bench_main.cpp @brief rdma_bench's plumbing: the life of main(), each QP's flags, the steps' wording. */
#include "options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cstdio>
#include <string>

namespace rdma_bench {

rdma_samples::Args args_for_qp(const rdma_samples::Args &args, std::uint32_t i, std::uint32_t qps)
{
    rdma_samples::Args one = args;
    if (qps == 1)
        return one;
    one.local_descriptor_path = rdma_samples::numbered_path(args.local_descriptor_path, static_cast<int>(i));
    one.remote_descriptor_path = rdma_samples::numbered_path(args.remote_descriptor_path, static_cast<int>(i));
    const std::uint32_t port = args.listen_port + i;
    if (args.use_cm && port > 65535)
        throw KnobError("-lp " + std::to_string(args.listen_port) + " with -q " + std::to_string(qps) + ": QP " +
                            std::to_string(i) + " would listen on port " + std::to_string(port) + ", beyond 65535",
                        "give -lp " + std::to_string(65536 - qps) + " or less on both sides");
    one.listen_port = static_cast<std::uint16_t>(port);
    return one;
}

std::string qps_text(const Options &opt)
{
    return opt.qps == 1 ? std::string("a QP") : std::to_string(opt.qps) + " QPs on it";
}

std::string requester_connect_text(const rdma_samples::Args &args, const Options &opt)
{
    const bool many = opt.qps > 1;
    if (args.use_cm)
        return std::string("connect to the responder with RDMA CM") +
               (many ? " (a connection per QP, on ports -lp and up)" : "") + "; it SENDs its mmap descriptor";
    return many ? "exchange descriptors with the responder (a pair per QP) and move the QPs to RTS"
                : "exchange descriptors with the responder and move the QP to RTS";
}

std::string responder_connect_text(const rdma_samples::Args &args)
{
    if (args.use_cm)
        return "wait for the requester to connect with RDMA CM (a connection per QP, on ports -lp and up), then "
               "SEND it our mmap descriptor";
    return "wait for the requester, move the QPs to RTR and RTS, export the buffer";
}

std::string measure_text(const Options &opt)
{
    char line[256];
    std::snprintf(
        line, sizeof line,
        "measure %s %s: %u iterations per size%s after %lld warm-up, %s polling, batches of %u, chains of %u%s",
        op_name(opt.op), opt.mode == Mode::bw ? "bandwidth" : "latency", opt.iters,
        opt.qps > 1 ? (" on each of " + std::to_string(opt.qps) + " QPs").c_str() : "",
        static_cast<long long>(opt.warmup), opt.events ? "event" : "busy", opt.poll_batch, opt.post_list,
        opt.extended ? ", posted with ibv_wr_*()" : "");
    return line;
}

int bench_main(rdma_samples::ProgramSpec spec, int argc, char **argv,
               void (*run)(const rdma_samples::Args &, const Options &))
{
    spec.rdma_cm = true;
    Options opt;
    add_bench_flags(spec, opt);
    return rdma_samples::run_sample(spec, argc, argv, [&](const rdma_samples::Args &args) {
        finish(opt);                             // defaults that depend on other knobs, and contradictions (exit 2)
        args_for_qp(args, opt.qps - 1, opt.qps); // (-cm -q N: the last QP's port exists, or exit 2 now)
        run(args, opt);
    });
}

} // namespace rdma_bench
