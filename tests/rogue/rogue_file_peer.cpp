/**
 * @file rogue_file_peer.cpp
 * @brief A peer of rdma_file_transfer that speaks protocol version 2 and lies: one lie per run, so that
 * tests/bats/rdma_file_transfer_rogue.bats can check that the real rdma_file_sender and
 * rdma_file_receiver catch each lie, say why, keep nothing they should not, and end in time.
 *
 *     rogue_file_peer --role sender   --lie CASE -sa ADDR -lp PORT [-t S]   (against rdma_file_receiver)
 *     rogue_file_peer --role receiver --lie CASE -lp PORT [-t S]           (against rdma_file_sender)
 *
 * Everything but the lie is done as the real program does it (protocol.hpp), so that the real program
 * meets the lie at the step the test names. The rogue prints what it does, every message it receives
 * (its text quoted) and the status of each of its own completions ("our WRITE: IBV_WC_REM_ACCESS_ERR").
 * It never waits longer than -t for anything, and ends when the real program ends the connection
 * (exit 0: the lie was answered), or when its own -t runs out (exit 1).
 */
#include "../../rdma_file_transfer/cm_qp.hpp"
#include "../../rdma_file_transfer/connection.hpp"
#include "../../rdma_file_transfer/events.hpp"
#include "../../rdma_file_transfer/peer_checks.hpp"
#include "../../rdma_file_transfer/support/files.hpp"
#include "../../rdma_file_transfer/protocol.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>

#include <deque>
#include <initializer_list>
#include <thread>
#include <vector>

using namespace rdma_samples;
using namespace rdma_file_transfer;

namespace {

enum class Role { sender, receiver };

/** Each lie the rogue can tell; the first group as a sender, the second as a receiver. */
// clang-format off
enum class Lie {
    bad_magic, short_message, id_first, offer_without_nul, name_escape, name_dotfile, name_dash, name_bidi, name_c1,
    name_not_utf8, offer_huge, name_long,
    zero_length_write, slot_out_of_range, chunk_too_long, chunks_after_end, done_at_half, done_wrong_digest,
    rewrite_slot, fake_credit, ignore_credits, stall_after_offer, knock, trickle, write_after_done,
    zero_slots, zero_chunk, chunk_2g, ring_1t, credit_before_write, credit_twice, credit_slot_99,
    verdict_before_done, verdict_wrong_digest, verdict_flags_7, refusal_escape, key_escape, key_without_nul, second_key,
    write_into_sender,
    second_ring, stall_before_ring, slow_credits,
};
// clang-format on

struct LieName {
    Lie lie;
    Role role;
    const char *name; ///< --lie's value
    const char *what; ///< printed at the start
};

const LieName lie_names[] = {
    {Lie::bad_magic, Role::sender, "bad-magic", "an offer whose magic is 0xdeadbeef"},
    {Lie::short_message, Role::sender, "short-message", "a 100-byte offer"},
    {Lie::id_first, Role::sender, "id-first", "an ID instead of the offer"},
    {Lie::offer_without_nul, Role::sender, "offer-no-nul", "an offer whose 384 bytes of text hold no NUL"},
    {Lie::name_escape, Role::sender, "name-escape", "the name \"\\x1b[31mred\""},
    {Lie::name_dotfile, Role::sender, "name-dotfile", "the name \".profile\""},
    {Lie::name_dash, Role::sender, "name-dash", "the name \"-rf\""},
    {Lie::name_bidi, Role::sender, "name-bidi", "the name \"invoice\", U+202E (right-to-left override), \"txt.exe\""},
    {Lie::name_c1, Role::sender, "name-c1", "the name \"a\", U+009B (C1's CSI, as UTF-8), \"31mred\""},
    {Lie::name_not_utf8, Role::sender, "name-not-utf8", "the name \"a\\x9b31mred\" (a lone C1 byte)"},
    {Lie::offer_huge, Role::sender, "offer-huge", "an offer of 2^62 bytes"},
    {Lie::name_long, Role::sender, "name-long", "a 240-byte name"},
    {Lie::zero_length_write, Role::sender, "zero-length-write", "a zero-length WRITE with immediate"},
    {Lie::slot_out_of_range, Role::sender, "slot-out-of-range", "a chunk whose immediate names slot `slots`"},
    {Lie::chunk_too_long, Role::sender, "chunk-too-long", "a first chunk of chunk + 1 bytes"},
    {Lie::chunks_after_end, Role::sender, "chunks-after-end", "the file, then 32 zero-length WRITEs with immediate"},
    {Lie::done_at_half, Role::sender, "done-at-half", "\"done\" (with the offered length) after half the chunks"},
    {Lie::done_wrong_digest, Role::sender, "done-wrong-digest", "\"done\" with a digest one bit off"},
    {Lie::rewrite_slot, Role::sender, "rewrite-slot",
     "each slot rewritten (plain WRITEs) after its WRITE with immediate"},
    {Lie::fake_credit, Role::sender, "fake-credit", "a SEND with immediate (a credit) to the receiver"},
    {Lie::ignore_credits, Role::sender, "ignore-credits",
     "no receive for the credits (one, for the ring), and 24 chunks without waiting for a credit"},
    {Lie::stall_after_offer, Role::sender, "stall-after-offer", "nothing after the offer"},
    {Lie::knock, Role::sender, "knock", "connection requests (--knocks), each given up at once (a REJ)"},
    {Lie::trickle, Role::sender, "trickle", "one chunk every 2 s"},
    {Lie::write_after_done, Role::sender, "write-after-done", "an RDMA WRITE into the ring after the verdict"},
    {Lie::zero_slots, Role::receiver, "zero-slots", "a ring of 0 slots"},
    {Lie::zero_chunk, Role::receiver, "zero-chunk", "a ring of 0-byte chunks"},
    {Lie::chunk_2g, Role::receiver, "chunk-2g", "a ring of 2^31-byte chunks"},
    {Lie::ring_1t, Role::receiver, "ring-1t", "a ring of 2^20 slots x 2^20 bytes (2^40 bytes)"},
    {Lie::credit_before_write, Role::receiver, "credit-before-write", "a credit for slot 0 right after the ring"},
    {Lie::credit_twice, Role::receiver, "credit-twice", "the first chunk's credit twice"},
    {Lie::credit_slot_99, Role::receiver, "credit-slot-99", "a credit for slot 99 instead of the first chunk's"},
    {Lie::verdict_before_done, Role::receiver, "verdict-before-done", "a verdict right after the ring (with --digest)"},
    {Lie::verdict_wrong_digest, Role::receiver, "verdict-wrong-digest", "verdict flags 1 with a digest one bit off"},
    {Lie::verdict_flags_7, Role::receiver, "verdict-flags-7", "verdict flags 7"},
    {Lie::refusal_escape, Role::receiver, "refusal-escape", "a refusal whose text holds escape sequences"},
    {Lie::key_escape, Role::receiver, "key-escape", "a key whose text holds escape sequences"},
    {Lie::key_without_nul, Role::receiver, "key-no-nul", "a key whose 384 bytes of text hold no NUL"},
    {Lie::second_key, Role::receiver, "second-key", "a second key right after the first"},
    {Lie::write_into_sender, Role::receiver, "write-into-sender",
     "an RDMA WRITE into the sender, right after the ring"},
    {Lie::second_ring, Role::receiver, "second-ring", "a second ring message right after the first"},
    {Lie::stall_before_ring, Role::receiver, "stall-before-ring", "accept, then never send the ring"},
    {Lie::slow_credits, Role::receiver, "slow-credits", "each credit 2 s late"},
};

/** What the command line asks for, besides the common flags. */
struct RogueOptions {
    std::optional<Role> role;
    std::optional<LieName> lie;
    std::optional<Digest> digest; ///< --digest: the file's SHA-256, for verdict-before-done
    std::uint64_t knocks = 1;     ///< --knocks: how many requests knock sends
};

/** The peer stopped the conversation: it refused, or disconnected. The lie was answered. */
struct PeerEnded {};

// wr_ids of our own work requests (receives are recv_wr_id, SENDs send_wr_id, as in protocol.hpp)
constexpr std::uint64_t plain_write_wr_id = 3; ///< an RDMA WRITE without immediate
constexpr std::uint32_t send_slots = 8;        ///< message buffers for our SENDs, used in turn
/// Receives posted, each into a buffer of its own: a real peer's messages are read as they came even
/// when two arrive before we poll (the real programs post all their receives into one buffer).
constexpr std::uint32_t recv_slots = 256;
constexpr std::uint32_t rogue_slots = 4, rogue_chunk = 4096;      ///< the rogue receiver's real ring
const std::string escapes = "\x1b[2J\x1b[31mred\x1b]0;owned\x07"; ///< clear screen, colour, window title

/** One connection and what has arrived on it. Declared in creation order: torn down in reverse. */
struct Link {
    Device dev{};
    CmConnection cm{}; ///< the event channel (and, on the receiver, the listening id)
    CmIdPtr id{};
    PdPtr pd{};
    CompChannelPtr channel{};
    CqPtr cq{};
    std::optional<Buffer> data{}; ///< the rogue sender's chunks, or the rogue receiver's ring
    Buffer messages{(recv_slots + send_slots) * sizeof(ControlMessage)}; ///< receives, then our SENDs
    MrPtr data_mr{}, msg_mr{};
    CmQp qp{};
    std::optional<Events> events{};
    std::string peer{};                  ///< "the receiver" or "the sender"
    int outstanding = 0;                 ///< our work requests not yet completed
    std::uint32_t sent_messages = 0;     ///< which send buffer is next
    std::uint64_t received = 0;          ///< receives completed: the next one's buffer is received % recv_slots
    std::uint32_t receives = recv_slots; ///< receives posted at the start, each posted again once it completed
    bool repost = true;                  ///< (ignore-credits: one receive, for the ring, and none after it)
    std::vector<bool> held{};            ///< (rogue sender) slots the receiver holds: no credit yet
    std::deque<ibv_wc> writes{};         ///< (rogue receiver) WRITEs with immediate not yet handled
    std::deque<ControlMessage> inbox{};  ///< messages not yet handled
    ibv_wc last_own{};                   ///< our last completion
    /** Receive buffer @p i (receives complete in the order posted, so the n-th lands in n % recv_slots). */
    ControlMessage *recv_buf(std::uint64_t i)
    {
        return reinterpret_cast<ControlMessage *>(messages.data()) + i % recv_slots;
    }
};

std::string own_name(std::uint64_t wr_id)
{
    if (wr_id >= write_wr_id)
        return "WRITE with immediate into slot " + std::to_string(wr_id - write_wr_id);
    return wr_id == plain_write_wr_id ? "WRITE" : "SEND";
}

/** Take one completion and file it: ours printed, a credit marks its slot free, a message goes to the
 *  inbox (a refusal ends the conversation), a WRITE with immediate waits in writes. */
void pump(Link &l, const std::string &what)
{
    ibv_wc wc{};
    try {
        wc = next_completion(*l.events, what);
        if (wc.wr_id != recv_wr_id) {
            --l.outstanding;
            l.last_own = wc;
            info("our %s: %s", own_name(wc.wr_id).c_str(), wc_status_name(wc.status));
            return;
        }
        if (wc.status != IBV_WC_SUCCESS) // (a receive's opcode is known only once it succeeded)
            check_wc(wc, IBV_WC_RECV, "a receive");
    } catch (const Error &e) {
        if (l.events->peer_state == PeerState::connected)
            throw;
        result("%s ended the connection (%s)", l.peer.c_str(), e.what());
        throw PeerEnded{};
    }
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        info("%s wrote %u bytes with immediate %u", l.peer.c_str(), wc.byte_len, be32toh(wc.imm_data));
        l.writes.push_back(wc);
    } else if (wc.wc_flags & IBV_WC_WITH_IMM) {
        const std::uint32_t slot = be32toh(wc.imm_data);
        info("%s sent a credit for slot %u", l.peer.c_str(), slot);
        if (slot < l.held.size())
            l.held[slot] = false;
    } else {
        const ControlMessage m = read_message(*l.recv_buf(l.received), wc.byte_len, l.peer);
        info("%s sent a %s: length %llu, flags %u, text %s", l.peer.c_str(), type_name(m.type).c_str(),
             static_cast<unsigned long long>(m.length), m.flags, quote(m.text, max_text).c_str());
        if (m.type == static_cast<std::uint16_t>(MessageType::refusal)) {
            result("%s refused: %s", l.peer.c_str(), quote(m.text, max_text).c_str());
            throw PeerEnded{};
        }
        l.inbox.push_back(m);
    }
    if (l.repost)
        post_receives(l.id->qp, 1, l.recv_buf(l.received), l.msg_mr->lkey); // the same buffer, at the queue's end
    ++l.received;
}

template <typename Ready>
void wait_until(Link &l, const std::string &what, Ready ready)
{
    while (!ready())
        pump(l, what);
}

/** The peer's next message, which must be of @p type (the real programs send nothing else). */
ControlMessage next_message(Link &l, MessageType type, const std::string &what)
{
    wait_until(l, what, [&] { return !l.inbox.empty(); });
    const ControlMessage m = l.inbox.front();
    l.inbox.pop_front();
    expect_type(m, type, l.peer, what);
    return m;
}

/** A message to SEND (fields in host order), its first @p bytes only. */
struct Outgoing {
    ControlMessage m;
    std::uint32_t bytes = sizeof(ControlMessage);
};

/** SEND each of @p out in one ibv_post_send() (a chain of work requests); each SEND has a buffer of its
 *  own. The device holds them all before it sends the first, so they leave back to back: the peer cannot
 *  read the first and act on it while the others are still on our side (in a 1-vCPU VM the scheduler may
 *  run the peer between two ibv_post_send() calls). */
void send_messages(Link &l, std::initializer_list<Outgoing> out)
{
    wait_until(l, "our SENDs to complete", [&] { return static_cast<std::size_t>(l.outstanding) + out.size() <= 16; });
    std::vector<ibv_sge> sges(out.size());
    std::vector<ibv_send_wr> wrs(out.size());
    std::size_t i = 0;
    for (const Outgoing &o : out) {
        auto *buf = reinterpret_cast<ControlMessage *>(l.messages.data()) + recv_slots + l.sent_messages++ % send_slots;
        *buf = swap_numbers(o.m);
        sges[i] = {reinterpret_cast<std::uintptr_t>(buf), o.bytes, l.msg_mr->lkey};
        wrs[i].wr_id = send_wr_id;
        wrs[i].opcode = IBV_WR_SEND;
        wrs[i].send_flags = IBV_SEND_SIGNALED;
        wrs[i].sg_list = &sges[i];
        wrs[i].num_sge = 1;
        wrs[i].next = i + 1 < out.size() ? &wrs[i + 1] : nullptr;
        ++i;
    }
    ibv_send_wr *bad = nullptr;
    check_post(ibv_post_send(l.id->qp, wrs.data(), &bad), "ibv_post_send(SEND)");
    l.outstanding += static_cast<int>(out.size());
    for (const Outgoing &o : out)
        info("sent a %u-byte %s: length %llu, addr 0x%llx, rkey 0x%x, chunk %u, slots %u, flags %u", o.bytes,
             type_name(le16toh(o.m.type)).c_str(), static_cast<unsigned long long>(o.m.length),
             static_cast<unsigned long long>(o.m.addr), o.m.rkey, o.m.chunk, o.m.slots, o.m.flags);
}

/** SEND @p m (fields in host order), its first @p bytes only. */
void send_message(Link &l, const ControlMessage &m, std::uint32_t bytes = sizeof(ControlMessage))
{
    send_messages(l, {{m, bytes}});
}

/** A zero-length SEND with immediate @p imm: a credit. */
void send_credit(Link &l, std::uint32_t imm)
{
    wait_until(l, "our SENDs to complete", [&] { return l.outstanding < 16; });
    post_send(l.id->qp, nullptr, 0, {}, imm);
    ++l.outstanding;
    info("sent a credit for slot %u", imm);
}

/** RDMA WRITE @p len bytes from our buffer at @p offset to the ring's @p remote_addr; with @p imm, a
 *  WRITE with immediate (wr_id names the slot), else a plain WRITE. */
void post_write(Link &l, const ControlMessage &ring, std::size_t offset, std::uint32_t len, std::uint64_t remote_addr,
                std::optional<std::uint32_t> imm)
{
    wait_until(l, "our WRITEs to complete", [&] { return l.outstanding < 48; });
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(l.data->data() + offset), len, l.data_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = plain_write_wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    if (imm) {
        wr.wr_id = write_wr_id + *imm;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htobe32(*imm);
    }
    wr.sg_list = &sge;
    wr.num_sge = len > 0 ? 1 : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = ring.rkey;
    ibv_send_wr *bad = nullptr;
    check_post(ibv_post_send(l.id->qp, &wr, &bad), "ibv_post_send(RDMA WRITE)");
    ++l.outstanding;
}

/** The CQ, its channel, and the QP on @p id, with its receives posted (before the peer can SEND); the
 *  waits of events.hpp on them and on @p cm_channel. @return the QP, which must go before @p id does */
CmQp make_qp(Link &l, const Args &args, rdma_cm_id *id, rdma_event_channel *cm_channel)
{
    l.cq.reset(); // (an earlier try's, its QP gone: a CQ goes before the channel it holds)
    l.channel.reset(check(ibv_create_comp_channel(id->verbs), "ibv_create_comp_channel"));
    l.cq.reset(check(ibv_create_cq(id->verbs, 1024, nullptr, l.channel.get(), 0), "ibv_create_cq"));
    l.msg_mr.reset(
        check(ibv_reg_mr(l.pd.get(), l.messages.data(), l.messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    ibv_qp_init_attr init{};
    init.send_cq = l.cq.get();
    init.recv_cq = l.cq.get();
    init.qp_type = IBV_QPT_RC;
    init.cap = {
        .max_send_wr = 64, .max_recv_wr = recv_slots, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
    check_rc(rdma_create_qp(id, l.pd.get(), &init), "rdma_create_qp");
    CmQp qp(id);
    for (std::uint32_t i = 0; i < l.receives; ++i)
        post_receives(id->qp, 1, l.recv_buf(i), l.msg_mr->lkey);
    l.events.emplace(Events{l.cq.get(), l.channel.get(), cm_channel, args.timeout_s, Deadline(3600), l.peer});
    return qp;
}

/** knock: @p n connection requests, one after the other, each given up at once: a new cm_id, its
 *  address and route, rdma_connect() (no QP: a QP number is all a REQ needs), and the cm_id destroyed,
 *  which sends a REJ. To the receiver, a stream of CONNECT_REQUESTs of clients that are gone. */
void knock(const Args &args, std::uint64_t n)
{
    SockAddr dst = parse_server_addr(*args.server_addr, args.server_addr_type, args.listen_port);
    const EventChannelPtr channel = create_event_channel();
    const std::string peer = addr_to_string(dst.get());
    for (std::uint64_t i = 0; i < n; ++i) {
        rdma_cm_id *raw = nullptr;
        check_rc(rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP), "rdma_create_id");
        const CmIdPtr id(raw);
        check_rc(rdma_resolve_addr(id.get(), nullptr, dst.get(), args.timeout_s * 1000), "rdma_resolve_addr");
        expect_cm_event(channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, args.timeout_s, "the receiver's address", peer);
        check_rc(rdma_resolve_route(id.get(), args.timeout_s * 1000), "rdma_resolve_route");
        expect_cm_event(channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, args.timeout_s, "a route", peer);
        rdma_conn_param param{};
        param.qp_num = 1;
        param.retry_count = 7;
        check_rc(rdma_connect(id.get(), &param), "rdma_connect");
    }
    result("sent %llu connection request(s) to %s, each given up at once", static_cast<unsigned long long>(n),
           peer.c_str());
}

/** Rogue sender: connect to rdma_file_receiver, again while nobody listens, as rdma_file_sender does
 *  (cm_retry()): the test starts us together with the receiver, not once it listens, so that our own
 *  start (under ASan, in a VM on a loaded machine: seconds) does not eat into the receiver's -t. */
void connect_to_receiver(Link &l, const Args &args)
{
    l.pd.reset(check(ibv_alloc_pd(cm_context(l.dev)), "ibv_alloc_pd")); // (every try's cm_id has this context)
    l.cm = cm_retry(args.cm_server(), args.timeout_s, nullptr, [&](CmTry &this_try) {
        if (!this_try.resolve(l.dev))
            return false;
        CmQp try_qp = make_qp(l, args, this_try.conn.id.get(), this_try.conn.channel.get()); // (goes first)
        rdma_conn_param param = cm_conn_param(this_try.conn.id->qp);
        check_rc(rdma_connect(this_try.conn.id.get(), &param), "rdma_connect");
        if (!established(this_try, args.timeout_s))
            return false;
        l.qp = std::move(try_qp);
        return true;
    });
    l.id = std::move(l.cm.id); // (the Link's id, as on the rogue receiver; l.cm keeps the channel)
    info("connected to %s", l.cm.peer.c_str());
}

/** Rogue receiver: listen, accept one rdma_file_sender, register a real ring of rogue_slots x rogue_chunk
 *  at I/O virtual address 0, as rdma_file_receiver does. */
void accept_sender(Link &l, const Args &args)
{
    l.cm = cm_listen(l.dev, args.listen_port);
    info("listening on port %u; waiting up to %d s for the sender", args.listen_port, args.timeout_s);
    for (const Deadline deadline(args.timeout_s);;) {
        if (!cm_event_ready(l.cm.channel.get(), deadline.left_ms()))
            throw timeout_error(args.timeout_s, "the sender to connect");
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(l.cm.channel.get(), &raw), "rdma_get_cm_event");
        CmEventPtr ev(raw);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == l.id.get())
            break;
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST || l.id)
            throw Error("RDMA CM: " + cm_event_name(ev->event) + " before the connection was up", "check the sender");
        l.id.reset(ev->id);
        l.pd.reset(check(ibv_alloc_pd(l.id->verbs), "ibv_alloc_pd"));
        l.data.emplace(std::size_t{rogue_slots} * rogue_chunk);
        l.data_mr.reset(check(ibv_reg_mr_iova(l.pd.get(), l.data->data(), l.data->size(), 0,
                                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                              "ibv_reg_mr_iova"));
        l.qp = make_qp(l, args, l.id.get(), l.cm.channel.get());
        rdma_conn_param param = cm_conn_param(l.id->qp);
        check_rc(rdma_accept(l.id.get(), &param), "rdma_accept");
    }
    info("connected to %s", addr_to_string(rdma_get_peer_addr(l.id.get())).c_str());
}

/** The rogue sender's file: @p size bytes of a pattern, and its SHA-256. */
Digest fill_file(Link &l, std::uint64_t size)
{
    l.data.emplace(std::max<std::uint64_t>(size, 1));
    for (std::uint64_t i = 0; i < size; ++i)
        l.data->data()[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
    l.data_mr.reset(
        check(ibv_reg_mr(l.pd.get(), l.data->data(), l.data->size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    Sha256 sha;
    sha.update(l.data->data(), size);
    return sha.final();
}

/** The offer as the lie wants it, and the file's size. */
ControlMessage make_offer(Lie lie, std::uint64_t size)
{
    std::string name = "rogue.bin";
    if (lie == Lie::name_escape)
        name = "\x1b[31mred";
    if (lie == Lie::name_dotfile)
        name = ".profile";
    if (lie == Lie::name_dash)
        name = "-rf";
    if (lie == Lie::name_bidi)
        name = "invoice\xe2\x80\xaetxt.exe";
    if (lie == Lie::name_c1)
        name = "a\xc2\x9b"
               "31mred";
    if (lie == Lie::name_not_utf8)
        name = "a\x9b"
               "31mred";
    if (lie == Lie::name_long)
        name = std::string(240, 'n');
    ControlMessage offer = make_message(lie == Lie::id_first ? MessageType::id : MessageType::offer, name);
    offer.length = lie == Lie::offer_huge ? std::uint64_t{1} << 62 : size;
    if (lie == Lie::bad_magic)
        offer.magic = htole32(0xdeadbeef);
    if (lie == Lie::offer_without_nul)
        std::memset(offer.text, 'A', max_text);
    return offer;
}

/** Send chunks [first, last) of the file honestly: slot k % used, after that slot's credit. With
 *  rewrite, each slot is then written again and again (plain WRITEs of other bytes) for a while. */
void send_chunks(Link &l, const ControlMessage &ring, std::uint64_t size, std::uint64_t first, std::uint64_t last,
                 Lie lie)
{
    for (std::uint64_t k = first; k < last; ++k) {
        const auto slot = static_cast<std::uint32_t>(k % l.held.size());
        wait_until(l, "the credit of slot " + std::to_string(slot), [&] { return !l.held[slot]; });
        const std::uint64_t offset = k * ring.chunk;
        const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(ring.chunk, size - offset));
        const std::uint64_t remote = ring.addr + std::uint64_t{slot} * ring.chunk;
        post_write(l, ring, offset, len, remote, slot);
        l.held[slot] = true;
        info("WRITE with immediate: chunk %llu, %u bytes into slot %u", static_cast<unsigned long long>(k), len, slot);
        // rewrite-slot: other bytes of the file (the next chunk's; the first's after the last) into the
        // same slot, again and again, while the receiver takes the chunk out
        const std::uint64_t other = offset + ring.chunk + len <= size ? offset + ring.chunk : 0;
        for (int i = 0; lie == Lie::rewrite_slot && i < 16; ++i)
            post_write(l, ring, other, len, remote, {});
        if (lie == Lie::trickle) { // (its credit first: a refusal that came meanwhile ends the trickle)
            wait_until(l, "the credit of slot " + std::to_string(slot), [&] { return !l.held[slot]; });
            std::this_thread::sleep_for(std::chrono::seconds(2));
        }
    }
}

/** The rogue sender: one lie against rdma_file_receiver. */
void sender_lies(Link &l, Lie lie)
{
    step(2, "SEND the offer");
    std::uint64_t size = 5 * rogue_chunk + 100;
    if (lie == Lie::chunk_too_long)
        size = rogue_chunk + 904;
    if (lie == Lie::rewrite_slot || lie == Lie::trickle)
        size = 16 * rogue_chunk;
    if (lie == Lie::ignore_credits)
        size = 24 * rogue_chunk;
    const Digest digest = fill_file(l, size);
    info("the file: %llu bytes, sha256 %s", static_cast<unsigned long long>(size), hex(digest).c_str());
    send_message(l, make_offer(lie, size), lie == Lie::short_message ? 100 : sizeof(ControlMessage));
    if (lie <= Lie::name_long) // the lie was in the offer (the offer lies come first in Lie)
        return;

    step(3, "receive the ring");
    const ControlMessage ring = next_message(l, MessageType::ring, "the receiver's ring");
    if (ring.slots == 0 || ring.chunk != rogue_chunk)
        throw Error("the receiver's ring has " + std::to_string(ring.slots) + " slots of " +
                        std::to_string(ring.chunk) + " bytes; the rogue's lies are sized for chunks of " +
                        std::to_string(rogue_chunk),
                    "run rdma_file_receiver with --chunk 4096");
    const std::uint64_t chunks = (size + ring.chunk - 1) / ring.chunk;
    l.held.assign(std::min<std::uint64_t>(ring.slots, 64), false);

    step(4, "the lie: %s", lie == Lie::stall_after_offer ? "send nothing more" : "chunks");
    ControlMessage done = make_message(MessageType::done);
    done.length = size;
    done.digest = digest;
    switch (lie) {
    case Lie::stall_after_offer: wait_until(l, "the receiver to give up", [] { return false; }); break;
    case Lie::zero_length_write: post_write(l, ring, 0, 0, ring.addr, 0); break;
    case Lie::slot_out_of_range: // the bytes into slot 0, the immediate names slot `slots`
        post_write(l, ring, 0, ring.chunk, ring.addr, ring.slots);
        break;
    case Lie::chunk_too_long: // one byte into slot 1 too: still inside the ring, so the device lets it in
        post_write(l, ring, 0, ring.chunk + 1, ring.addr, 0);
        break;
    case Lie::fake_credit: send_credit(l, 0); break;
    case Lie::ignore_credits: // each chunk honest but for the credit it never waits for, nor can receive
        for (std::uint64_t k = 0; k < chunks; ++k)
            post_write(l, ring, k * ring.chunk, ring.chunk, ring.addr + k % ring.slots * ring.chunk,
                       static_cast<std::uint32_t>(k % ring.slots));
        info("posted %llu chunks without a credit", static_cast<unsigned long long>(chunks));
        wait_until(l, "the receiver to give up", [] { return false; });
        break;
    case Lie::chunks_after_end:
        send_chunks(l, ring, size, 0, chunks, lie);
        for (int i = 0; i < 32; ++i)
            post_write(l, ring, 0, 0, ring.addr, 0);
        info("posted 32 zero-length WRITEs with immediate after the last chunk");
        break;
    case Lie::done_at_half: {
        const std::uint64_t half = chunks / 2;
        send_chunks(l, ring, size, 0, half, lie);
        Sha256 sha;
        sha.update(l.data->data(), half * ring.chunk);
        done.digest = sha.final(); // the digest of what was sent; the length the offer said
        send_message(l, done);
        break;
    }
    case Lie::done_wrong_digest:
        send_chunks(l, ring, size, 0, chunks, lie);
        done.digest[0] ^= 1;
        send_message(l, done);
        break;
    case Lie::rewrite_slot:
    case Lie::trickle:
        send_chunks(l, ring, size, 0, chunks, lie);
        info("\"done\" with the digest of the original bytes: %s", hex(digest).c_str());
        send_message(l, done);
        break;
    case Lie::write_after_done: {
        send_chunks(l, ring, size, 0, chunks, lie);
        send_message(l, done);
        next_message(l, MessageType::verdict, "the verdict"); // the receiver deregistered its ring before it
        wait_until(l, "our SENDs to complete", [&] { return l.outstanding == 0; });
        post_write(l, ring, 0, ring.chunk, ring.addr, {});
        wait_until(l, "our WRITE after \"done\" to complete", [&] { return l.outstanding == 0; });
        result("our WRITE after \"done\" completed with %s", wc_status_name(l.last_own.status));
        return; // our QP is in the error state now: nothing more can be sent
    }
    default: break;
    }
}

/** The rogue receiver: one lie against rdma_file_sender. */
void receiver_lies(Link &l, Lie lie, const RogueOptions &opt)
{
    step(3, "receive the offer, SEND the ring");
    next_message(l, MessageType::offer, "the sender's offer"); // (printed as it came)
    ControlMessage ring = make_message(MessageType::ring);     // addr 0: the ring's I/O virtual address
    ring.rkey = l.data_mr->rkey;
    ring.chunk = rogue_chunk;
    ring.slots = rogue_slots;
    switch (lie) { // the lies told instead of the ring, or inside it
    case Lie::stall_before_ring:
        info("the lie: send no ring");
        wait_until(l, "the sender to give up", [] { return false; });
        return;
    case Lie::refusal_escape:
        send_message(l, make_message(MessageType::refusal, "go away " + escapes + "\nhint " + escapes));
        return;
    case Lie::zero_slots: ring.slots = 0; break;
    case Lie::zero_chunk: ring.chunk = 0; break;
    case Lie::chunk_2g: ring.chunk = 1U << 31; break;
    case Lie::ring_1t: // 2^40 bytes: a sender that believed it would try to allocate them
        ring.slots = 1U << 20;
        ring.chunk = 1U << 20;
        break;
    default: break;
    }
    send_message(l, ring);
    switch (lie) { // the lies told right after the ring
    case Lie::second_ring: send_message(l, ring); break;
    case Lie::credit_before_write: send_credit(l, 0); break;
    case Lie::write_into_sender: { // 16 bytes of our messages to address 0 of the sender, an rkey it never gave
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(l.messages.data()), 16, l.msg_mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = plain_write_wr_id;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = 0;
        wr.wr.rdma.rkey = 0x1234;
        ibv_send_wr *bad = nullptr;
        check_post(ibv_post_send(l.id->qp, &wr, &bad), "ibv_post_send(RDMA WRITE)");
        ++l.outstanding;
        wait_until(l, "our WRITE into the sender to complete", [&] { return l.outstanding == 0; });
        result("our WRITE into the sender completed with %s", wc_status_name(l.last_own.status));
        return; // our QP is in the error state now
    }
    case Lie::verdict_before_done: {
        ControlMessage verdict = make_message(MessageType::verdict);
        verdict.flags = 1;
        verdict.digest = opt.digest.value_or(Digest{}); // (the test knows the file, so the rogue may too)
        send_message(l, verdict);
        break;
    }
    default: break;
    }

    step(4, "for each chunk: hash its slot, SEND the credit");
    Sha256 sha;
    std::uint64_t received = 0;
    for (std::uint64_t k = 0;; ++k) {
        wait_until(l, "the next chunk", [&] { return !l.writes.empty() || !l.inbox.empty(); });
        if (l.writes.empty())
            break; // a message: "done"
        const ibv_wc wc = l.writes.front();
        l.writes.pop_front();
        const std::uint32_t slot = be32toh(wc.imm_data);
        if (slot >= rogue_slots || wc.byte_len > rogue_chunk)
            throw Error("the real sender wrote " + std::to_string(wc.byte_len) + " bytes into slot " +
                            std::to_string(slot),
                        "check rdma_file_sender");
        sha.update(l.data->data() + std::size_t{slot} * rogue_chunk, wc.byte_len);
        received += wc.byte_len;
        // slow-credits: each credit 2 s late, unless RDMA CM says something meanwhile (the sender left)
        if (lie == Lie::slow_credits && cm_event_ready(l.cm.channel.get(), 2000)) {
            result("the sender ended the connection (an RDMA CM event while we held back its credit)");
            throw PeerEnded{};
        }
        send_credit(l, lie == Lie::credit_slot_99 && k == 0 ? 99 : slot);
        if (lie == Lie::credit_twice && k == 0)
            send_credit(l, slot);
    }
    const ControlMessage done = next_message(l, MessageType::done, "\"done\"");
    info("\"done\": %llu bytes (we counted %llu), sha256 %s", static_cast<unsigned long long>(done.length),
         static_cast<unsigned long long>(received), hex(done.digest).c_str());

    step(5, "SEND the verdict");
    ControlMessage verdict = make_message(MessageType::verdict);
    verdict.digest = sha.final();
    verdict.flags = verdict.digest == done.digest ? 1 : 0;
    if (lie == Lie::verdict_wrong_digest) {
        verdict.flags = 1;
        verdict.digest[0] ^= 1;
    }
    if (lie == Lie::verdict_flags_7)
        verdict.flags = 7;
    if (lie != Lie::verdict_before_done) // (it had its verdict already)
        send_message(l, verdict);

    step(6, "receive the ID, SEND the key");
    const ControlMessage id = next_message(l, MessageType::id, "the sender's ID");
    ControlMessage key = make_message(MessageType::receipt, "rogue receipt for " + std::string(id.text));
    if (lie == Lie::key_escape)
        key = make_message(MessageType::key, "key " + escapes);
    if (lie == Lie::key_without_nul) {
        key = make_message(MessageType::key);
        std::memset(key.text, 'K', max_text);
    }
    if (lie == Lie::second_key) // (in one post: the sender must not disconnect between the two)
        send_messages(l, {{key}, {make_message(MessageType::key, "a second key")}});
    else
        send_message(l, key);
}

void run(const Args &args, const RogueOptions &opt)
{
    if (!opt.role || !opt.lie)
        throw UsageError("--role and --lie are required", "e.g. --role sender --lie bad-magic; --help lists the lies");
    if (opt.lie->role != *opt.role)
        throw UsageError(std::string("--lie ") + opt.lie->name + " is told by the other role");
    const bool sender = *opt.role == Role::sender;
    step(1, "%s: lie %s: %s", sender ? "connect to the receiver" : "accept the sender", opt.lie->name, opt.lie->what);
    Link l{.dev = open_device(args.device, args.gid_index), .peer = sender ? "the receiver" : "the sender"};
    if (opt.lie->lie == Lie::ignore_credits) {
        l.receives = 1; // the ring's
        l.repost = false;
    }
    try {
        if (sender) {
            if (opt.lie->lie == Lie::knock)
                return knock(args, opt.knocks);
            connect_to_receiver(l, args);
            sender_lies(l, opt.lie->lie);
        } else {
            accept_sender(l, args);
            receiver_lies(l, opt.lie->lie, opt);
        }
        if (l.last_own.status == IBV_WC_SUCCESS) { // (after an error our QP can do nothing more)
            info("the lie is told; waiting up to %d s for %s to end the connection", args.timeout_s, l.peer.c_str());
            wait_until(l, l.peer + " to end the connection", [] { return false; });
        }
    } catch (const PeerEnded &) {
    }
    rdma_disconnect(l.id.get()); // (answers the peer's DREQ; an error here changes nothing)
}

} // namespace

int main(int argc, char **argv)
{
    RogueOptions opt;
    std::string lies;
    for (const LieName &n : lie_names)
        lies += std::string(lies.empty() ? "" : ", ") + n.name;
    ProgramSpec spec{.name = "rogue_file_peer",
                     .role = "receiver",
                     .summary = "A peer of rdma_file_transfer that lies (a test tool).",
                     .resource_descriptor = false,
                     .rdma_cm = true,
                     .descriptor_files = false};
    // The common parser knows who connects by the role's name: the "sender" needs -sa, others refuse it.
    for (int i = 1; i + 1 < argc; ++i)
        if (std::string(argv[i]) == "--role" && std::string(argv[i + 1]) == "sender")
            spec.role = "sender";
    spec.extra = {
        {"role", "sender|receiver", "which side to play", "none: required",
         [&opt](const std::string &v) {
             if (v != "sender" && v != "receiver")
                 throw UsageError("--role: sender or receiver, got " + quote(v));
             opt.role = v == "sender" ? Role::sender : Role::receiver;
         }},
        {"lie", "CASE", "the lie: " + lies, "none: required",
         [&opt](const std::string &v) {
             for (const LieName &n : lie_names)
                 if (v == n.name)
                     opt.lie = n;
             if (!opt.lie)
                 throw UsageError("--lie: no lie " + quote(v), "--help lists them");
         }},
        {"digest", "HEX", "the file's SHA-256, for verdict-before-done", "none: zeros",
         [&opt](const std::string &v) {
             Digest d{};
             for (std::size_t i = 0; i < d.size(); ++i) {
                 const auto byte =
                     v.size() == 64 ? parse_unsigned("0x" + v.substr(2 * i, 2), NumberBase::hex, 255) : std::nullopt;
                 if (!byte)
                     throw UsageError("--digest: 64 hex digits, got " + quote(v));
                 d[i] = static_cast<std::uint8_t>(*byte);
             }
             opt.digest = d;
         }},
        {"knocks", "N", "how many connection requests knock sends, one after the other", "1",
         [&opt](const std::string &v) { opt.knocks = parse_number("--knocks", v, 1, 1000000); }},
    };
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
