/**
 * @file mr_bounds.cpp
 * @brief Device test: memory outside an exported range is never changed, whatever a requester sends.
 *
 * The lesson: the responder's device (the HCA, or Soft-RoCE in the kernel) checks every remote access
 * against the memory region named by its rkey: the rkey must be valid, the access must be one the
 * region grants, and every byte from the remote address to address + length must lie inside the
 * region. A request that fails a check is refused whole (NAK, IBV_WC_REM_ACCESS_ERR at the requester)
 * before any byte is moved: memory outside the region is never touched, and not even the part of a
 * straddling request that falls inside it.
 *
 * The test shows it on one device. A 3-page "responder" buffer is filled with a canary; only 256 bytes
 * in the middle page are registered, with remote write, read and atomic access, so every refusal below
 * is about bounds (or the rkey), never about permissions. Two RC QPs on the device are connected to
 * each other (loopback). Each hostile request gets a fresh pair of QPs, because a refused request
 * leaves both in ERR. After each, all 3 pages are compared with what they must hold. A valid WRITE of
 * the whole window ends the run, to show that the setup does let good requests through.
 *
 * Output is TAP: a plan line, then one "ok N - ..." or "not ok N - ..." per case, with the completion
 * status the device returned. Exit status 0 when every case passed, 1 otherwise, 2 for a bad command
 * line. Every wait is bounded by -t (default 5 s).
 *
 *     mr_bounds [-d NAME] [-g INDEX] [-t SECONDS]
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/verbs.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace rdma_samples;

namespace {

constexpr unsigned char canary = 0xA5;  // every responder byte, until a WRITE is allowed to change it
constexpr unsigned char pattern = 0x5A; // every byte the requester sends (and its buffer's initial value)
constexpr std::uint64_t canary64 = 0xA5A5A5A5A5A5A5A5ULL;
constexpr std::size_t window_offset = 512;   // the export starts here in the middle page...
constexpr std::uint32_t window_length = 256; // ...and is this long
constexpr std::uint64_t wr_id = 1;

enum class Op { write, read, fetch_add, cmp_swap };

/** One request the requester sends, at an address relative to the window's start ("addr"). */
struct Case {
    std::string name; ///< for the TAP line, e.g. "WRITE 1 byte at addr-1"
    Op op;
    std::int64_t offset;                   ///< remote address = addr + offset (ignored when absolute is set)
    std::optional<std::uint64_t> absolute; ///< a remote address not relative to addr
    std::uint32_t length;                  ///< bytes (8 for atomics)
    bool wrong_rkey = false;               ///< use rkey ^ 0x1000 instead of the window's rkey
};

/** The hostile requests. Each must fail, and leave every byte of the 3 pages as it was. */
std::vector<Case> hostile_cases(long page)
{
    const std::int64_t end = window_length;
    return {
        {"WRITE 1 byte at addr-1", Op::write, -1, {}, 1},
        {"WRITE 1 byte at addr+256", Op::write, end, {}, 1},
        {"WRITE 257 bytes at addr", Op::write, 0, {}, 257},
        {"WRITE 16 bytes at addr+250 (straddling the end)", Op::write, 250, {}, 16},
        {"WRITE 8 bytes at addr-" + std::to_string(page), Op::write, -page, {}, 8},
        {"READ 8 bytes at addr+256", Op::read, end, {}, 8},
        {"READ 8 bytes at addr-8", Op::read, -8, {}, 8},
        {"FETCH_AND_ADD at addr-8", Op::fetch_add, -8, {}, 8},
        {"FETCH_AND_ADD at addr+256", Op::fetch_add, end, {}, 8},
        {"CMP_AND_SWP at addr-8", Op::cmp_swap, -8, {}, 8},
        {"CMP_AND_SWP at addr+256", Op::cmp_swap, end, {}, 8},
        {"WRITE 8 bytes at 0xfffffffffffffffc (the range wraps past 2^64)", Op::write, 0,
         std::numeric_limits<std::uint64_t>::max() - 3, 8},
        {"WRITE 8 bytes at addr with a wrong rkey (rkey ^ 0x1000)", Op::write, 0, {}, 8, true},
    };
}

const char *op_name(Op op)
{
    switch (op) {
    case Op::write: return "RDMA_WRITE";
    case Op::read: return "RDMA_READ";
    case Op::fetch_add: return "ATOMIC_FETCH_AND_ADD";
    case Op::cmp_swap: return "ATOMIC_CMP_AND_SWP";
    }
    return "?";
}

/** Two RC QPs on one device, connected to each other, completing into one CQ. */
struct Loopback {
    CqPtr cq; // declared first: destroyed last, after the QPs
    QpPtr requester;
    QpPtr responder;
};

/**
 * A fresh requester/responder pair, both at RTS. Only the responder grants remote access on its QP;
 * READs and atomics need rd_atomic depth on both sides.
 */
Loopback connect_loopback(const Device &dev, ibv_pd *pd)
{
    const QpCaps caps{4, 4};
    Loopback lb;
    lb.cq.reset(check(ibv_create_cq(dev.ctx.get(), 2 * cq_entries(caps), nullptr, nullptr, 0), "ibv_create_cq"));
    lb.requester = create_rc_qp(pd, lb.cq.get(), caps);
    lb.responder = create_rc_qp(pd, lb.cq.get(), caps);
    const std::uint32_t req_psn = random_psn(), resp_psn = random_psn();
    const ConnectionDescriptor req = describe_qp(lb.requester.get(), dev, req_psn, 0);
    const ConnectionDescriptor resp = describe_qp(lb.responder.get(), dev, resp_psn, 0);
    const int init_depth = std::clamp(dev.device_attr.max_qp_init_rd_atom, 1, 16);
    const int dest_depth = std::clamp(dev.device_attr.max_qp_rd_atom, 1, 16);
    qp_to_init(lb.requester.get(), dev, 0);
    qp_to_init(lb.responder.get(), dev, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    qp_to_rtr(lb.requester.get(), dev, resp);
    qp_to_rtr(lb.responder.get(), dev, req, dest_depth);
    qp_to_rts(lb.requester.get(), req_psn, init_depth);
    qp_to_rts(lb.responder.get(), resp_psn);
    return lb;
}

/** The completion of our one request, or nothing if none came within @p timeout_s: never a hang. */
std::optional<ibv_wc> poll_bounded(ibv_cq *cq, int timeout_s)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(cq, 1, &wc)) == 1 && wc.wr_id == wr_id)
            return wc;
        std::this_thread::sleep_for(std::chrono::microseconds(200)); // rxe works on this same CPU
    }
    return std::nullopt;
}

/** What the requester posted and the device answered. */
struct Outcome {
    int post_errno = 0;       // ibv_post_send refused the request locally
    std::optional<ibv_wc> wc; // its completion, if one came in time
};

Outcome post_and_wait(ibv_qp *qp, ibv_cq *cq, const ibv_mr *local, Op op, std::uint64_t remote_addr,
                      std::uint32_t length, std::uint32_t rkey, int timeout_s)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(local->addr);
    sge.length = length;
    sge.lkey = local->lkey;
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    switch (op) {
    case Op::write:
    case Op::read:
        wr.opcode = op == Op::write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = remote_addr;
        wr.wr.rdma.rkey = rkey;
        break;
    case Op::fetch_add:
    case Op::cmp_swap:
        wr.opcode = op == Op::fetch_add ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = remote_addr;
        wr.wr.atomic.rkey = rkey;
        // Operands that WOULD change the word if the device let the request through: add 1, or swap
        // when the word holds the canary (it does).
        wr.wr.atomic.compare_add = op == Op::fetch_add ? 1 : canary64;
        wr.wr.atomic.swap = 0x5A5A5A5A5A5A5A5AULL;
        break;
    }
    Outcome out;
    ibv_send_wr *bad = nullptr;
    if (const int rc = ibv_post_send(qp, &wr, &bad); rc != 0) {
        out.post_errno = rc > 0 ? rc : errno;
        return out;
    }
    out.wc = poll_bounded(cq, timeout_s);
    return out;
}

/** "addr-1", "addr+256", "addr": a responder offset relative to the window's start. */
std::string where(std::int64_t rel)
{
    if (rel == 0)
        return "addr";
    return "addr" + std::string(rel < 0 ? "-" : "+") + std::to_string(rel < 0 ? -rel : rel);
}

/**
 * Compare @p actual with @p expected; "" when equal, else how many bytes differ and the first one, e.g.
 * "2 responder bytes changed, first at addr-1: 0xa5 -> 0x5a". @p window_base: where the window starts
 * in the buffers, to name bytes as addr+N; none for the requester's buffer (named by offset).
 */
std::string differences(const unsigned char *actual, const std::vector<unsigned char> &expected,
                        std::optional<std::size_t> window_base)
{
    std::size_t count = 0, first = 0;
    for (std::size_t i = 0; i < expected.size(); ++i)
        if (actual[i] != expected[i] && count++ == 0)
            first = i;
    if (count == 0)
        return {};
    const std::string at = window_base
                               ? where(static_cast<std::int64_t>(first) - static_cast<std::int64_t>(*window_base))
                               : "offset " + std::to_string(first);
    char text[160];
    std::snprintf(text, sizeof text, "%zu %s byte%s changed, first at %s: 0x%02x -> 0x%02x", count,
                  window_base ? "responder" : "requester", count == 1 ? "" : "s", at.c_str(), expected[first],
                  actual[first]);
    return text;
}

const char *qp_state_name(ibv_qp *qp)
{
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) != 0)
        return "unknown";
    return rdma_samples::qp_state_name(attr.qp_state);
}

/** The command line: -d, -g and -t, checked as the samples check them. */
Args parse_command_line(int argc, char **argv)
{
    Args args;
    args.timeout_s = 5;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "-h" || flag == "--help") {
            std::printf("Usage: mr_bounds [-d NAME] [-g INDEX] [-t SECONDS]\n"
                        "Send hostile RDMA requests at a 256-byte export on one device (loopback) and check that\n"
                        "memory outside it never changes. TAP output; exit 0 when every case passes.\n"
                        "  -d NAME      RDMA device (default: first with an active port)\n"
                        "  -g INDEX     GID index (default: best GID: RoCE v2 with an IPv4 address)\n"
                        "  -t SECONDS   bound of every wait for a completion (default: 5)\n");
            std::exit(0);
        }
        if (flag != "-d" && flag != "-g" && flag != "-t")
            throw UsageError("unknown argument " + quote(flag) + " (takes -d NAME, -g INDEX, -t SECONDS)");
        if (i + 1 >= argc)
            throw UsageError(flag + ": missing value");
        const std::string value = argv[++i];
        if (flag == "-d") {
            const bool plain =
                !value.empty() && value.size() <= 64 && std::all_of(value.begin(), value.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                           c == '-' || c == '.';
                });
            if (!plain)
                throw UsageError("-d: " + quote(value) + " is not a device name");
            args.device = value;
        } else if (flag == "-g") {
            args.gid_index = static_cast<int>(parse_number(flag, value, 0, 255));
        } else {
            args.timeout_s = static_cast<int>(parse_number(flag, value, 1, 600));
        }
    }
    return args;
}

int run(const Args &args)
{
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    const long page = ::sysconf(_SC_PAGESIZE);
    const auto page_size = static_cast<std::size_t>(page);

    // The responder: 3 pages of canary, of which only 256 bytes in the middle page are exported.
    Buffer pages(3 * page_size);
    auto *mem = reinterpret_cast<unsigned char *>(pages.data());
    std::memset(mem, canary, pages.size());
    const std::size_t base = page_size + window_offset; // the window's offset in the 3 pages
    const int access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    MrPtr window(check(ibv_reg_mr(pd.get(), mem + base, window_length, access), "ibv_reg_mr(window, 256 bytes)"));
    const std::uint64_t addr = reinterpret_cast<std::uintptr_t>(mem + base);

    // The requester's own buffer: the bytes it WRITEs, and where READs and atomics land.
    Buffer local(page_size);
    auto *own = reinterpret_cast<unsigned char *>(local.data());
    MrPtr local_mr(check(ibv_reg_mr(pd.get(), own, local.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr(requester)"));

    const std::uint32_t bad_rkey = window->rkey ^ 0x1000;
    if (bad_rkey == local_mr->rkey)
        throw Error("rkey ^ 0x1000 is the requester buffer's own key; nothing would be proved", "run again");

    std::vector<Case> cases = hostile_cases(page);
    const bool atomics = dev.device_attr.atomic_cap != IBV_ATOMIC_NONE;
    std::printf("1..%zu\n", cases.size() + 2);
    std::printf("# device %s, GID index %d; window addr 0x%llx, length %u, rkey 0x%x, access %s; -t %d s\n",
                dev.name.c_str(), dev.gid_index, static_cast<unsigned long long>(addr), window_length, window->rkey,
                access_to_string(access).c_str(), args.timeout_s);
    std::fflush(stdout);

    const std::vector<unsigned char> all_canary(pages.size(), canary);
    const std::vector<unsigned char> own_initial(local.size(), pattern);
    int n = 0, failed = 0;

    for (const Case &c : cases) {
        ++n;
        if ((c.op == Op::fetch_add || c.op == Op::cmp_swap) && !atomics) {
            std::printf("ok %d - %s # SKIP %s has no atomics (atomic_cap IBV_ATOMIC_NONE)\n", n, c.name.c_str(),
                        dev.name.c_str());
            continue;
        }
        std::memset(own, pattern, local.size());
        const std::uint64_t remote = c.absolute ? *c.absolute : addr + static_cast<std::uint64_t>(c.offset);
        Outcome out;
        std::string states;
        {
            Loopback lb = connect_loopback(dev, pd.get());
            out = post_and_wait(lb.requester.get(), lb.cq.get(), local_mr.get(), c.op, remote, c.length,
                                c.wrong_rkey ? bad_rkey : window->rkey, args.timeout_s);
            states = std::string("requester QP ") + qp_state_name(lb.requester.get()) + ", responder QP " +
                     qp_state_name(lb.responder.get());
        } // both QPs destroyed here: nothing more can reach the memory through them

        // Judge: the request must have failed, and no byte of the 3 pages (window included) may differ.
        // A READ or atomic must also have brought nothing back into the requester's buffer.
        std::string verdict;
        bool pass = false;
        if (out.post_errno != 0) {
            verdict = std::string("ibv_post_send refused it locally: ") + std::strerror(out.post_errno) + " (errno " +
                      std::to_string(out.post_errno) + "), so the responder's check was not exercised";
        } else if (!out.wc) {
            verdict = "no completion within " + std::to_string(args.timeout_s) + " s";
        } else if (out.wc->status == IBV_WC_SUCCESS) {
            verdict = std::string("IBV_WC_SUCCESS: the device ACCEPTED this ") + op_name(c.op);
        } else {
            verdict = wc_status_name(out.wc->status);
            pass = true;
        }
        const std::string changed = differences(mem, all_canary, base);
        const std::string leaked = differences(own, own_initial, std::nullopt);
        if (!changed.empty()) {
            verdict += "; " + changed;
            pass = false;
            std::memset(mem, canary, pages.size()); // so that the next case is judged on its own
        } else {
            verdict += ", memory outside unchanged, window unchanged";
        }
        if (c.op != Op::write) {
            if (!leaked.empty()) {
                verdict += "; " + leaked + " (data came back)";
                pass = false;
            } else {
                verdict += ", nothing read back";
            }
        }
        std::printf("%s %d - %s: %s\n", pass ? "ok" : "not ok", n, c.name.c_str(), verdict.c_str());
        std::printf("# after it: %s\n", states.c_str());
        std::fflush(stdout);
        failed += pass ? 0 : 1;
    }

    // The control: the same setup lets a valid request through, and it changes exactly the window.
    ++n;
    std::memset(own, pattern, local.size());
    std::vector<unsigned char> expected = all_canary;
    std::memset(expected.data() + base, pattern, window_length);
    {
        Loopback lb = connect_loopback(dev, pd.get());
        const Outcome out = post_and_wait(lb.requester.get(), lb.cq.get(), local_mr.get(), Op::write, addr,
                                          window_length, window->rkey, args.timeout_s);
        std::string verdict = out.post_errno != 0
                                  ? std::string("ibv_post_send failed: ") + std::strerror(out.post_errno)
                              : !out.wc ? "no completion within " + std::to_string(args.timeout_s) + " s"
                                        : wc_status_name(out.wc->status);
        bool pass = out.post_errno == 0 && out.wc && out.wc->status == IBV_WC_SUCCESS;
        const std::string changed = differences(mem, expected, base);
        if (!changed.empty()) {
            verdict += "; " + changed + " (compared with the window written, the rest canary)";
            pass = false;
        } else {
            verdict += ", exactly the 256 window bytes changed";
        }
        std::printf("%s %d - WRITE 256 bytes at addr (the whole window, control): %s\n", pass ? "ok" : "not ok", n,
                    verdict.c_str());
        failed += pass ? 0 : 1;
    }

    // Last: all 3 pages, once more, with every QP gone.
    ++n;
    std::size_t outside_bad = 0;
    for (std::size_t i = 0; i < pages.size(); ++i)
        if ((i < base || i >= base + window_length) && mem[i] != canary)
            ++outside_bad;
    if (outside_bad == 0)
        std::printf("ok %d - after all cases: every byte of the 3 pages outside the window holds the canary 0x%02x\n",
                    n, canary);
    else
        std::printf("not ok %d - after all cases: %zu bytes outside the window no longer hold the canary 0x%02x\n", n,
                    outside_bad, canary);
    failed += outside_bad == 0 ? 0 : 1;
    std::fflush(stdout);
    return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    Args args;
    try {
        args = parse_command_line(argc, argv);
    } catch (const UsageError &e) {
        std::fprintf(stderr, "mr_bounds: %s\n", e.what());
        return 2;
    }
    try {
        return run(args);
    } catch (const Error &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "mr_bounds: %s%s%s\n", e.what(), e.hint().empty() ? "" : "; hint: ", e.hint().c_str());
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "mr_bounds: %s\n", e.what());
    }
    return 1;
}
