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
    std::vector<std::uint32_t> v;
    for (std::uint32_t s = 2; s <= max_size; s *= 2)
        v.push_back(s);
    return v;
}

void add_bench_flags(rdma_samples::ProgramSpec &spec, Options &o)
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
        [&o](const std::string &v) {
            if (v == "write")
                o.op = Op::write;
            else if (v == "read")
                o.op = Op::read;
            else if (v == "send")
                o.op = Op::send;
            else if (v == "write_imm")
                o.op = Op::write_imm;
            else if (v == "atomic")
                o.op = Op::atomic;
            else
                throw rdma_samples::UsageError("--op: expected write, read, send, write_imm or atomic, got " +
                                               rdma_samples::quote(v));
        });
    either("atomic", "with --op atomic: fadd (fetch-and-add) or cas (compare-and-swap, ib_atomic_* -A CMP_AND_SWAP)",
           "fadd", "cas", "fetch-and-add", "compare-and-swap", o.cas, &o.explicit_atomic);
    add("mode", "MODE", "bw (bandwidth and message rate, like ib_*_bw) or lat (latency, like ib_*_lat)", "bw",
        [&o](const std::string &v) {
            if (v == "bw")
                o.mode = Mode::bw;
            else if (v == "lat")
                o.mode = Mode::lat;
            else
                throw rdma_samples::UsageError("--mode: expected bw or lat, got " + rdma_samples::quote(v));
        });
    add("size", "BYTES", "message size (atomics: always 8)", "65536 for bw, 2 for lat",
        [&o, f = number("--size", UINT32_MAX)](const std::string &v) { o.size = static_cast<std::uint32_t>(f(v)); });
    add("all", "", "every power of two from 2 B to 8 MiB (perftest -a)", "off",
        [&o](const std::string &) { o.all_sizes = true; });
    add("iters", "N", "timed operations per size", "1000",
        [&o, f = number("--iters", 100000000)](const std::string &v) { o.iters = static_cast<std::uint32_t>(f(v)); });
    add(
        "qps", "N", "bandwidth: N queue pairs, each carrying --iters messages, sharing one CQ (perftest -q)", "1",
        [&o](const std::string &v) {
            o.qps = static_cast<std::uint32_t>(parse_number("--qps", v, 0, 1000000));
            if (o.qps == 0 || o.qps > max_qps)
                throw KnobError("--qps " + v + ": expected 1 to " + std::to_string(max_qps) + " queue pairs",
                                "give -q 1 to " + std::to_string(max_qps) +
                                    " (each QP has its own slice of memory, up to 8 MiB, on both sides)");
        },
        "q");
    add("duration", "SECONDS",
        "bandwidth of write, read, atomic: repeat --iters rounds until SECONDS have passed (perftest -D)",
        "off (one round)", [&o, f = number("--duration", 86400)](const std::string &v) {
            o.duration_s = static_cast<std::uint32_t>(f(v));
            if (o.duration_s == 0)
                throw KnobError("--duration 0: nothing would be measured",
                                "give --duration 1 or more, or leave it out");
        });
    add("warmup", "N", "untimed operations before the timed ones, per size", "iters / 10",
        [&o, f = number("--warmup", 100000000)](const std::string &v) { o.warmup = static_cast<std::int64_t>(f(v)); });
    add("tx-depth", "N", "send work requests in flight at once (the queue depth, max_send_wr)", "128 for bw, 1 for lat",
        [&o, f = number("--tx-depth", 16384)](const std::string &v) {
            o.tx_depth = static_cast<std::uint32_t>(f(v));
            o.explicit_tx_depth = true;
        });
    add("rx-depth", "N", "receives posted ahead of the sender (send, write_imm)", "512",
        [&o, f = number("--rx-depth", 16384)](const std::string &v) { o.rx_depth = static_cast<std::uint32_t>(f(v)); });
    add("cq-mod", "N", "selective signaling: ask for a completion on every N-th send only", "min(100, depth) bw, 1 lat",
        [&o, f = number("--cq-mod", 16384)](const std::string &v) {
            o.cq_mod = static_cast<std::uint32_t>(f(v));
            o.explicit_cq_mod = true;
        });
    add("inline-size", "BYTES", "send messages up to BYTES inline (IBV_SEND_INLINE, max_inline_data)", "0 bw, 220 lat",
        [&o, f = number("--inline-size", max_size)](const std::string &v) {
            o.inline_size = static_cast<std::int64_t>(f(v));
        });
    add("post-list", "N", "post a chain of N work requests with one ibv_post_send()", "1",
        [&o, f = number("--post-list", 16384)](const std::string &v) {
            o.post_list = static_cast<std::uint32_t>(f(v));
        });
    add("poll-batch", "N", "completions taken per ibv_poll_cq() call", "16",
        [&o, f = number("--poll-batch", 4096)](const std::string &v) {
            o.poll_batch = static_cast<std::uint32_t>(f(v));
        });
    add("events", "", "wait on a completion channel (ibv_req_notify_cq) instead of busy polling", "off",
        [&o](const std::string &) { o.events = true; });
    add("no-yield", "", "busy polling never yields the CPU (perftest's way; needs a CPU per process)",
        "yield every 1024 empty polls", [&o](const std::string &) { o.yield = false; });
    either("output", "the result rows as a table (aligned, perftest's layout) or csv (comma-separated, with a header)",
           "table", "csv", "aligned", "comma-separated", o.csv, nullptr);
    add("verify", "", "check the data after the run (leave off when measuring)", "off",
        [&o](const std::string &) { o.verify = true; });
}

void finish(Options &o)
{
    const bool lat = o.mode == Mode::lat;
    const bool one_sided_in = o.op == Op::read || o.op == Op::atomic; // nothing of ours to send inline
    if (o.explicit_tx_depth && o.tx_depth == 0)
        throw KnobError("--tx-depth 0: no work request could ever be posted",
                        "give --tx-depth 1 or more: 1 for latency, 128 is perftest's default for bandwidth");
    if (o.tx_depth == 0)
        o.tx_depth = lat ? 1 : 128;
    if (o.explicit_cq_mod && o.cq_mod == 0)
        throw KnobError("--cq-mod 0: no send would ever ask for a completion",
                        "give --cq-mod 1 (signal every send) or more");
    if (o.explicit_cq_mod && o.cq_mod > o.tx_depth)
        throw KnobError("--cq-mod " + std::to_string(o.cq_mod) + ": above the send queue depth (--tx-depth " +
                            std::to_string(o.tx_depth) +
                            "): the queue would fill with unsignaled sends and never drain",
                        "signal at least one in every max_send_wr sends: give --cq-mod " + std::to_string(o.tx_depth) +
                            " or less, or raise --tx-depth");
    if (o.cq_mod == 0)
        o.cq_mod = lat ? 1 : std::min<std::uint32_t>(100, o.tx_depth);
    if (o.post_list == 0 || o.post_list > o.tx_depth)
        throw KnobError("--post-list " + std::to_string(o.post_list) + ": a chain must hold 1 to --tx-depth (" +
                            std::to_string(o.tx_depth) + ") work requests",
                        "give --post-list " + std::to_string(std::min<std::uint32_t>(o.tx_depth, 16)) +
                            " or raise --tx-depth");
    if (o.poll_batch == 0)
        throw KnobError("--poll-batch 0: ibv_poll_cq() would take no completion",
                        "give --poll-batch 1 or more (16 is perftest's)");
    if (o.rx_depth == 0)
        throw KnobError("--rx-depth 0: a message would find no receive", "give --rx-depth 1 or more");
    if (o.duration_s > 0 && (lat || o.op == Op::send || o.op == Op::write_imm))
        throw KnobError("--duration: only for --mode bw of write, read or atomic: the responder of a " +
                            std::string(lat ? "ping-pong" : "SEND") + " counts the messages it takes",
                        "give --iters N instead (the number of operations)");
    if (o.qps > 1 && lat)
        throw KnobError("--qps " + std::to_string(o.qps) + ": a latency test times one operation at a time, on one QP",
                        "give --mode bw with -q, or leave -q out (perftest's ib_*_lat refuse -q too)");
    if (o.explicit_atomic && o.op != Op::atomic)
        throw KnobError(std::string("--atomic: only for --op atomic, not --op ") + op_name(o.op),
                        "add --op atomic, or leave --atomic out");
    if (o.op == Op::atomic && o.size != 0 && o.size != 8)
        throw KnobError("--size " + std::to_string(o.size) + ": an atomic always moves 8 bytes",
                        "leave --size out with --op atomic");
    if (o.size == 0)
        o.size = o.op == Op::atomic ? 8 : lat ? 2 : 65536;
    if (o.size > max_size)
        throw KnobError("--size " + std::to_string(o.size) + ": larger than the " + std::to_string(max_size) +
                            "-byte memory region each side registers",
                        "give --size " + std::to_string(max_size) + " or less (--all goes up to it)");
    if (o.iters == 0)
        throw KnobError("--iters 0: nothing to measure", "give --iters 1 or more");
    if (o.warmup < 0)
        o.warmup = o.iters / 10;
    if (one_sided_in && o.inline_size > 0)
        throw KnobError("--inline-size " + std::to_string(o.inline_size) + ": " + op_name(o.op) +
                            " sends no data of ours, so nothing can go inline",
                        "leave --inline-size out with --op read or atomic");
    if (o.inline_size < 0)
        o.inline_size = lat && !one_sided_in ? 220 : 0; // perftest's default for ib_write_lat
}

} // namespace rdma_bench
