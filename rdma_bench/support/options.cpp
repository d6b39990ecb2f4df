/** @file options.cpp @brief rdma_bench's knobs: flags, defaults, checks. */
#include "options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>

#include <algorithm>
#include <cstdio>

using rdma_samples::parse_number;

namespace rdma_bench {

const char *op_name(Op op)
{
    switch (op) {
    case Op::write: return "write";
    case Op::read: return "read";
    case Op::send: return "send";
    case Op::write_imm: return "write_imm";
    case Op::atomic: return "atomic";
    }
    return "?";
}

std::vector<std::uint32_t> Options::sizes() const
{
    if (!all_sizes || op == Op::atomic)
        return {size};
    std::vector<std::uint32_t> all;
    for (std::uint32_t bytes = 2; bytes <= max_size; bytes *= 2)
        all.push_back(bytes);
    return all;
}

void add_bench_flags(rdma_samples::ProgramSpec &spec, Options &opt)
{
    auto number = [](const char *flag, std::uint64_t hi) {
        return [flag, hi](const std::string &v) { return parse_number(flag, v, 0, hi); };
    };
    auto add = [&](const char *name, const char *value, const char *help, const char *def,
                   std::function<void(const std::string &)> apply, const char *short_name = "") {
        spec.extra.push_back({name, value, help, def, std::move(apply), short_name});
    };
    // A flag that takes one of two words: `no` leaves `field` false, `yes` sets it; anything else is a
    // usage error whose hint names both (`hint_no`, `hint_yes` say what each means).
    auto either = [&](const char *name, const char *help, const char *no, const char *yes, const char *hint_no,
                      const char *hint_yes, bool &field, bool *given) {
        add(name, "WORD", help, no, [=, &field](const std::string &v) {
            const std::string flag = std::string("--") + name;
            if (v != no && v != yes)
                throw KnobError(flag + ": expected " + no + " or " + yes + ", got " + rdma_samples::quote(v),
                                "give " + flag + " " + no + " (" + hint_no + ") or " + flag + " " + yes + " (" +
                                    hint_yes + ")");
            field = v == yes;
            if (given != nullptr)
                *given = true;
        });
    };
    add("op", "OP", "write, read, send, write_imm or atomic (fetch-and-add, or --atomic cas)", "write",
        [&opt](const std::string &v) {
            if (v == "write")
                opt.op = Op::write;
            else if (v == "read")
                opt.op = Op::read;
            else if (v == "send")
                opt.op = Op::send;
            else if (v == "write_imm")
                opt.op = Op::write_imm;
            else if (v == "atomic")
                opt.op = Op::atomic;
            else
                throw rdma_samples::UsageError("--op: expected write, read, send, write_imm or atomic, got " +
                                               rdma_samples::quote(v));
        });
    either("atomic", "with --op atomic: fadd (fetch-and-add) or cas (compare-and-swap, ib_atomic_* -A CMP_AND_SWAP)",
           "fadd", "cas", "fetch-and-add", "compare-and-swap", opt.cas, &opt.explicit_atomic);
    add("mode", "MODE", "bw (bandwidth and message rate, like ib_*_bw) or lat (latency, like ib_*_lat)", "bw",
        [&opt](const std::string &v) {
            if (v == "bw")
                opt.mode = Mode::bw;
            else if (v == "lat")
                opt.mode = Mode::lat;
            else
                throw rdma_samples::UsageError("--mode: expected bw or lat, got " + rdma_samples::quote(v));
        });
    add("size", "BYTES", "message size (atomics: always 8)", "65536 for bw, 2 for lat",
        [&opt, parse = number("--size", UINT32_MAX)](const std::string &v) {
            opt.size = static_cast<std::uint32_t>(parse(v));
        });
    add("all", "", "every power of two from 2 B to 8 MiB (perftest -a)", "off",
        [&opt](const std::string &) { opt.all_sizes = true; });
    add("iters", "N", "timed operations per size", "1000",
        [&opt, parse = number("--iters", 100000000)](const std::string &v) {
            opt.iters = static_cast<std::uint32_t>(parse(v));
        });
    add(
        "qps", "N", "bandwidth: N queue pairs, each carrying --iters messages, sharing one CQ (perftest -q)", "1",
        [&opt](const std::string &v) {
            opt.qps = static_cast<std::uint32_t>(parse_number("--qps", v, 0, 1000000));
            if (opt.qps == 0 || opt.qps > max_qps)
                throw KnobError("--qps " + v + ": expected 1 to " + std::to_string(max_qps) + " queue pairs",
                                "give -q 1 to " + std::to_string(max_qps) +
                                    " (each QP has its own slice of memory, up to 8 MiB, on both sides)");
        },
        "q");
    add("duration", "SECONDS",
        "bandwidth of write, read, atomic: repeat --iters rounds until SECONDS have passed (perftest -D)",
        "off (one round)", [&opt, parse = number("--duration", 86400)](const std::string &v) {
            opt.duration_s = static_cast<std::uint32_t>(parse(v));
            if (opt.duration_s == 0)
                throw KnobError("--duration 0: nothing would be measured",
                                "give --duration 1 or more, or leave it out");
        });
    add("warmup", "N", "untimed operations before the timed ones, per size", "iters / 10",
        [&opt, parse = number("--warmup", 100000000)](const std::string &v) {
            opt.warmup = static_cast<std::int64_t>(parse(v));
        });
    add("tx-depth", "N", "send work requests in flight at once (the queue depth, max_send_wr)", "128 for bw, 1 for lat",
        [&opt, parse = number("--tx-depth", 16384)](const std::string &v) {
            opt.tx_depth = static_cast<std::uint32_t>(parse(v));
            opt.explicit_tx_depth = true;
        });
    add("rx-depth", "N", "receives posted ahead of the sender (send, write_imm)", "512",
        [&opt, parse = number("--rx-depth", 16384)](const std::string &v) {
            opt.rx_depth = static_cast<std::uint32_t>(parse(v));
        });
    add("cq-mod", "N", "selective signaling: ask for a completion on every N-th send only", "min(100, depth) bw, 1 lat",
        [&opt, parse = number("--cq-mod", 16384)](const std::string &v) {
            opt.cq_mod = static_cast<std::uint32_t>(parse(v));
            opt.explicit_cq_mod = true;
        });
    add("inline-size", "BYTES", "send messages up to BYTES inline (IBV_SEND_INLINE, max_inline_data)", "0 bw, 220 lat",
        [&opt, parse = number("--inline-size", max_size)](const std::string &v) {
            opt.inline_size = static_cast<std::int64_t>(parse(v));
        });
    add("post-list", "N", "post N work requests with one ibv_post_send() (or one ibv_wr_complete())", "1",
        [&opt, parse = number("--post-list", 16384)](const std::string &v) {
            opt.post_list = static_cast<std::uint32_t>(parse(v));
        });
    add("poll-batch", "N", "completions taken per ibv_poll_cq() call", "16",
        [&opt, parse = number("--poll-batch", 4096)](const std::string &v) {
            opt.poll_batch = static_cast<std::uint32_t>(parse(v));
        });
    add("events", "", "wait on a completion channel (ibv_req_notify_cq) instead of busy polling", "off",
        [&opt](const std::string &) { opt.events = true; });
    add("no-yield", "", "busy polling never yields the CPU (perftest's way; needs a CPU per process)",
        "yield every 1024 empty polls", [&opt](const std::string &) { opt.yield = false; });
    either("api",
           "how requests are posted: ibv_post_send() with a chain of work requests (classic), or ibv_wr_*() "
           "between ibv_wr_start() and ibv_wr_complete() (extended, perftest's default; chapter 21)",
           "classic", "extended", "ibv_post_send(), perftest --use_old_post_send", "ibv_wr_*(), perftest's default",
           opt.extended, nullptr);
    either("output", "the result rows as a table (aligned, perftest's layout) or csv (comma-separated, with a header)",
           "table", "csv", "aligned", "comma-separated", opt.csv, nullptr);
    add("verify", "", "check the data after the run (leave off when measuring)", "off",
        [&opt](const std::string &) { opt.verify = true; });
}

void finish(Options &opt)
{
    const bool lat = opt.mode == Mode::lat;
    const bool one_sided_in = opt.op == Op::read || opt.op == Op::atomic; // nothing of ours to send inline
    if (opt.explicit_tx_depth && opt.tx_depth == 0)
        throw KnobError("--tx-depth 0: no work request could ever be posted",
                        "give --tx-depth 1 or more: 1 for latency, 128 is perftest's default for bandwidth");
    if (opt.tx_depth == 0)
        opt.tx_depth = lat ? 1 : 128;
    if (opt.explicit_cq_mod && opt.cq_mod == 0)
        throw KnobError("--cq-mod 0: no send would ever ask for a completion",
                        "give --cq-mod 1 (signal every send) or more");
    if (opt.explicit_cq_mod && opt.cq_mod > opt.tx_depth)
        throw KnobError("--cq-mod " + std::to_string(opt.cq_mod) + ": above the send queue depth (--tx-depth " +
                            std::to_string(opt.tx_depth) +
                            "): the queue would fill with unsignaled sends and never drain",
                        "signal at least one in every max_send_wr sends: give --cq-mod " +
                            std::to_string(opt.tx_depth) + " or less, or raise --tx-depth");
    if (opt.cq_mod == 0)
        opt.cq_mod = lat ? 1 : std::min<std::uint32_t>(100, opt.tx_depth);
    if (opt.post_list == 0 || opt.post_list > opt.tx_depth)
        throw KnobError("--post-list " + std::to_string(opt.post_list) + ": a chain must hold 1 to --tx-depth (" +
                            std::to_string(opt.tx_depth) + ") work requests",
                        "give --post-list " + std::to_string(std::min<std::uint32_t>(opt.tx_depth, 16)) +
                            " or raise --tx-depth");
    if (opt.poll_batch == 0)
        throw KnobError("--poll-batch 0: ibv_poll_cq() would take no completion",
                        "give --poll-batch 1 or more (16 is perftest's)");
    if (opt.rx_depth == 0)
        throw KnobError("--rx-depth 0: a message would find no receive", "give --rx-depth 1 or more");
    if (opt.duration_s > 0 && (lat || opt.op == Op::send || opt.op == Op::write_imm))
        throw KnobError("--duration: only for --mode bw of write, read or atomic: the responder of a " +
                            std::string(lat ? "ping-pong" : "SEND") + " counts the messages it takes",
                        "give --iters N instead (the number of operations)");
    if (opt.qps > 1 && lat)
        throw KnobError("--qps " + std::to_string(opt.qps) +
                            ": a latency test times one operation at a time, on one QP",
                        "give --mode bw with -q, or leave -q out (perftest's ib_*_lat refuse -q too)");
    if (opt.explicit_atomic && opt.op != Op::atomic)
        throw KnobError(std::string("--atomic: only for --op atomic, not --op ") + op_name(opt.op),
                        "add --op atomic, or leave --atomic out");
    if (opt.op == Op::atomic && opt.size != 0 && opt.size != 8)
        throw KnobError("--size " + std::to_string(opt.size) + ": an atomic always moves 8 bytes",
                        "leave --size out with --op atomic");
    if (opt.size == 0)
        opt.size = opt.op == Op::atomic ? 8 : lat ? 2 : 65536;
    if (opt.size > max_size)
        throw KnobError("--size " + std::to_string(opt.size) + ": larger than the " + std::to_string(max_size) +
                            "-byte memory region each side registers",
                        "give --size " + std::to_string(max_size) + " or less (--all goes up to it)");
    if (opt.iters == 0)
        throw KnobError("--iters 0: nothing to measure", "give --iters 1 or more");
    if (opt.warmup < 0)
        opt.warmup = opt.iters / 10;
    if (one_sided_in && opt.inline_size > 0)
        throw KnobError("--inline-size " + std::to_string(opt.inline_size) + ": " + op_name(opt.op) +
                            " sends no data of ours, so nothing can go inline",
                        "leave --inline-size out with --op read or atomic");
    if (opt.inline_size < 0)
        opt.inline_size = lat && !one_sided_in ? 220 : 0; // perftest's default for ib_write_lat
}

} // namespace rdma_bench
