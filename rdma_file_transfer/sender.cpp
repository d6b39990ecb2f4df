/**
 * @file sender.cpp
 * @brief Putting it together, sender side: send one file into the receiver's ring of slots, verified.
 *
 * The seven steps of the classic lab: connect (RDMA CM); SEND the length and the name; receive the
 * ring's addr, rkey, chunk and slots; RDMA WRITE the file chunk after chunk, hashing each as it is read,
 * each WRITE carrying an immediate value that names its slot, and reuse a slot only when our WRITE into
 * it completed and the receiver sent the slot back as a credit; SEND "done" with the digest; receive the
 * verdict and check it against our own digest; SEND our ID and receive the key. Like the receiver, it
 * sleeps on a completion channel (events.hpp), and checks everything the receiver sends before using it.
 * Memory is at most the ring's size, and never more than the file needs. See receiver.cpp.
 */
#include "events.hpp"
#include "support/files.hpp"
#include "support/options.hpp"
#include "protocol.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <thread>

using namespace rdma_samples;
using namespace file_transfer;

namespace {

/** The most chunks we keep in flight: one receive each for their credits (our receive queue's size). */
constexpr std::uint32_t max_window = 1024;

/** A slot of ours: free again once our WRITE into it completed and its credit came back. */
struct Slot {
    bool written = true;  ///< our last WRITE into it completed (its buffer may be refilled)
    bool credited = true; ///< the receiver gave the slot back (it may be written again)
};

/** The connection as the completions tell it: the slots, and the receiver's last message. */
struct Connection {
    Events events;
    ibv_qp *qp;
    ControlMessage *recv_buf; ///< where every message lands
    std::uint32_t recv_lkey;
    std::vector<Slot> slots;               ///< the slots in use
    std::optional<ControlMessage> message; ///< a message not yet read
    bool reply_due = false;                ///< we sent what the receiver must answer (offer, done, ID)
    int sends = 0;                         ///< our SENDs not yet completed
};

/** Take completions until @p ready() holds; each completion's wr_id says what it is. Every credit and
 *  message is checked as it arrives: a credit for a slot we did not write is a lie, so is a message the
 *  receiver does not owe us (the protocol has one message in flight at a time, each the answer to ours).
 *  Every receive points into the one message buffer: an honest receiver never has two messages in flight,
 *  and a second one is caught here, at its own completion. */
template <typename Ready>
void wait_until(Connection &c, const std::string &what, Ready ready)
{
    while (!ready()) {
        const ibv_wc wc = next_completion(c.events, what);
        if (wc.wr_id >= write_wr_id) { // our WRITE into slot wr_id - write_wr_id was acknowledged
            check_wc(wc, IBV_WC_RDMA_WRITE, "our WRITE with immediate");
            c.slots.at(wc.wr_id - write_wr_id).written = true;
            continue;
        }
        if (wc.wr_id == send_wr_id) { // our SEND was acknowledged
            check_wc(wc, IBV_WC_SEND, "our SEND");
            --c.sends;
            continue;
        }
        check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.wc_flags & IBV_WC_WITH_IMM) { // a credit: zero bytes, the slot in the immediate value
            const std::uint32_t slot = be32toh(wc.imm_data);
            if (wc.byte_len != 0 || slot >= c.slots.size() || c.slots[slot].credited)
                throw Error("the receiver returned slot " + std::to_string(slot) + " (" + std::to_string(wc.byte_len) +
                                " bytes), which is not one we wrote and it still holds",
                            "the receiver does not follow the protocol");
            c.slots[slot].credited = true;
        } else {
            const ControlMessage m = read_message(*c.recv_buf, wc.byte_len, "the receiver");
            if (m.type == static_cast<std::uint16_t>(MessageType::refusal))
                expect_type(m, MessageType::refusal, "the receiver", what); // throws its reason
            if (!c.reply_due) // (cleared by the answer, so a second message finds it false)
                throw Error("the receiver sent a " + type_name(m.type) + " message while we waited for " + what +
                                "; it owed us no message then",
                            "the receiver does not follow the protocol");
            // An honest receiver credits every chunk before it answers "done", and on RC our receives
            // complete in the order it sent: a message that comes while it holds a slot came too early.
            for (std::size_t slot = 0; slot < c.slots.size(); ++slot)
                if (!c.slots[slot].credited)
                    throw Error("the receiver sent a " + type_name(m.type) + " message while it still held slot " +
                                    std::to_string(slot) + ": it answered before it had all the data",
                                "the receiver does not follow the protocol");
            c.message = m;
            c.reply_due = false;
        }
        post_receives(c.qp, 1, c.recv_buf, c.recv_lkey); // give the receive back at once
    }
}

/** The receiver's next message, which must be of @p type. */
ControlMessage expect_message(Connection &c, MessageType type, const std::string &what)
{
    wait_until(c, what, [&] { return c.message.has_value(); });
    const ControlMessage m = *c.message;
    c.message.reset();
    expect_type(m, type, "the receiver", what);
    return m;
}

/** Why the receiver's @p ring cannot be used (an empty slot, more than we accept, an address range
 *  that wraps), or "" when it can. */
std::string bad_ring(const ControlMessage &ring)
{
    if (ring.slots == 0 || ring.chunk == 0)
        return "a ring of " + std::to_string(ring.slots) + " slots of " + std::to_string(ring.chunk) + " bytes";
    if (ring.chunk > max_chunk || std::uint64_t{ring.slots} * ring.chunk > max_ring_bytes)
        return "a ring of " + std::to_string(ring.slots) + " x " + std::to_string(ring.chunk) +
               " bytes; we accept chunks of at most " + std::to_string(max_chunk) + " and rings of at most " +
               std::to_string(max_ring_bytes) + " bytes";
    if (ring.addr > UINT64_MAX - std::uint64_t{ring.slots} * ring.chunk)
        return "a ring at addr " + hex(ring.addr) + " that wraps around the address space";
    return {};
}

void run(const Args &args, const SenderOptions &opt)
{
    step(1, "open %s and the device: the file is hashed as it is sent, not before", quote(opt.file).c_str());
    Source src = open_source(opt.file);
    Device dev = open_device(args.device, args.gid_index);

    step(2, "connect to %s port %u with RDMA CM; rdma_create_qp() makes the QP", args.server_addr->c_str(),
         args.listen_port);
    SockAddr dst = parse_server_addr(*args.server_addr, args.server_addr_type, args.listen_port);
    const std::string peer = addr_to_string(dst.get());
    // Everything lives on librdmacm's own context of our device (rdma_create_qp() insists on it).
    ibv_context *verbs = cm_context(dev);
    PdPtr pd(check(ibv_alloc_pd(verbs), "ibv_alloc_pd"));
    const std::uint32_t depth = max_window + 4;  // WRITEs in flight, and the messages
    Buffer messages(2 * sizeof(ControlMessage)); // [0] receives, [1] sends
    auto *recv_buf = reinterpret_cast<ControlMessage *>(messages.data());
    MrPtr msg_mr(check(ibv_reg_mr(pd.get(), messages.data(), messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    CompChannelPtr channel(check(ibv_create_comp_channel(verbs), "ibv_create_comp_channel"));
    EventChannelPtr cm_channel = create_event_channel();
    // Declared in the order of creation, so that they go in reverse: the QP before the MRs it uses.
    CmIdPtr id;
    CqPtr cq;
    std::optional<Buffer> chunks; // (made in step 4, once the ring's geometry is known)
    MrPtr chunk_mr;
    CmQp qp;
    //! [connect]
    for (const Deadline deadline(args.timeout_s);;) { // like a TCP client: again while nobody listens
        rdma_cm_id *raw_id = nullptr;
        check_rc(rdma_create_id(cm_channel.get(), &raw_id, nullptr, RDMA_PS_TCP), "rdma_create_id");
        id.reset(raw_id);
        check_rc(rdma_resolve_addr(id.get(), nullptr, dst.get(), std::max(deadline.left_ms(), 1)), "rdma_resolve_addr");
        expect_cm_event(cm_channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "the receiver's address", peer);
        check_cm_device(id.get(), dev); // the device that reaches ADDR must be the one -d names
        check_rc(rdma_resolve_route(id.get(), std::max(deadline.left_ms(), 1)), "rdma_resolve_route");
        expect_cm_event(cm_channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "a route to the receiver", peer);
        // A CQ per try: the QP of a try that failed may leave flushed receives in its CQ.
        cq.reset(check(ibv_create_cq(verbs, static_cast<int>(depth + max_window + 2), nullptr, channel.get(), 0),
                       "ibv_create_cq"));
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = IBV_QPT_RC;
        init.cap = {.max_send_wr = depth,
                    .max_recv_wr = max_window + 2,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = 0};
        check_rc(rdma_create_qp(id.get(), pd.get(), &init), "rdma_create_qp"); // librdmacm moves it INIT..RTS
        qp.reset(id.get());
        post_receives(id->qp, max_window + 2, recv_buf, msg_mr->lkey); // before the receiver can SEND
        rdma_conn_param param = cm_conn_param(id->qp);
        check_rc(rdma_connect(id.get(), &param), "rdma_connect");
        if (!cm_event_ready(cm_channel.get(), deadline.left_ms()))
            throw timeout_error(args.timeout_s, "the receiver to accept",
                                "is rdma_file_receiver running on " + peer + "?");
        rdma_cm_event *raw_ev = nullptr;
        check_rc(rdma_get_cm_event(cm_channel.get(), &raw_ev), "rdma_get_cm_event");
        CmEventPtr ev(raw_ev);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
            break; // librdmacm took our QP to RTR and RTS and sent the RTU
        const bool nobody_listens = ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8; // IB CM reason 8
        if (!nobody_listens)
            throw Error("RDMA CM: " + cm_event_name(ev->event) + " (status " + std::to_string(ev->status) + ") from " +
                            peer,
                        "is rdma_file_receiver there, with the same -lp, serving nobody else?");
        if (deadline.left_ms() < 200)
            throw Error("nobody listens on " + peer + " (RDMA_CM_EVENT_REJECTED, status 8)",
                        "start rdma_file_receiver there (with the same -lp), or raise -t");
        ev.reset();
        qp.reset(nullptr); // rdma_destroy_qp(), then a new cm_id for the next try
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    //! [connect]
    Connection c{{cq.get(), channel.get(), cm_channel.get(), args.timeout_s, Deadline(opt.deadline_s), "the receiver"},
                 id->qp,
                 recv_buf,
                 msg_mr->lkey,
                 {},
                 {},
                 0};
    auto send = [&](const ControlMessage &m) { // and wait until it is delivered
        post_send(id->qp, recv_buf + 1, msg_mr->lkey, m);
        ++c.sends;
        wait_until(c, "our SEND to complete", [&] { return c.sends == 0; });
    };
    auto refuse = [&](const Error &e) { // tell the receiver why we stop, then stop with that reason
        try {
            send(make_message(MessageType::refusal, std::string(e.what()) + "\n" + e.hint()));
        } catch (const Error &) { // (a QP already broken: the receiver learns it from its own side)
        }
        throw e;
    };

    step(3, "SEND the offer: %llu bytes, the name %s (protocol version %u)", static_cast<unsigned long long>(src.size),
         quote(opt.name).c_str(), test_fault().version);
    ControlMessage offer = make_message(MessageType::offer, opt.name);
    offer.version = htole16(test_fault().version); // (the test hook may announce another version)
    offer.length = src.size;
    c.reply_due = true; // the ring, or a refusal
    send(offer);

    step(4, "receive the ring (addr, rkey, chunk, slots), check it, and register our own chunk buffers");
    const ControlMessage ring = expect_message(c, MessageType::ring, "the receiver's ring");
    if (const std::string why = bad_ring(ring); !why.empty())
        refuse(Error("the receiver offers " + why,
                     "the receiver does not follow the protocol, or its --slots/--chunk are too big"));
    // Only what the file needs: a 100-byte file into a ring of 4 x 1 MiB takes one buffer of 100 bytes.
    const std::uint64_t chunks_needed = (src.size + ring.chunk - 1) / ring.chunk;
    const std::uint32_t used =
        static_cast<std::uint32_t>(std::min<std::uint64_t>({ring.slots, max_window, chunks_needed}));
    const std::size_t buffer_size = static_cast<std::size_t>(std::min<std::uint64_t>(ring.chunk, src.size));
    info("ring: addr 0x%llx, rkey 0x%x, %u slots of %u bytes; %u in flight at most",
         static_cast<unsigned long long>(ring.addr), ring.rkey, ring.slots, ring.chunk, used);
    chunks.emplace(std::max<std::size_t>(std::size_t{used} * buffer_size, 1));
    // Our device only reads these bytes (the WRITEs' source): no access flag is needed.
    chunk_mr.reset(check(ibv_reg_mr(pd.get(), chunks->data(), chunks->size(), 0), "ibv_reg_mr"));
    c.slots.assign(used, Slot{});

    step(5, "read, hash and WRITE the file chunk after chunk, each with an immediate naming its slot");
    Progress progress(src.size, "sent");
    Sha256 sha; // one pass: the bytes as they leave
    std::uint64_t offset = 0;
    for (std::uint64_t k = 0; offset < src.size; ++k) {
        //! [credit_loop]
        const std::uint32_t slot = static_cast<std::uint32_t>(k % used);
        wait_until(c, "the credit of slot " + std::to_string(slot),
                   [&] { return c.slots[slot].credited && c.slots[slot].written; });
        char *local = chunks->data() + std::size_t{slot} * buffer_size;
        const std::size_t want = std::min<std::uint64_t>(ring.chunk, src.size - offset);
        const std::size_t len = read_at(src.fd.get(), local, want, offset);
        if (len != want)
            break; // the file shrank: the check below says so
        sha.update(local, len);
        if (k == 0 && test_fault().corrupt)
            local[0] = static_cast<char>(local[0] ^ 1); // test only: damage the data after hashing it
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), static_cast<std::uint32_t>(len), chunk_mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = write_wr_id + slot;          // its completion says which buffer is free again
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; // the bytes into the slot, and a completion for the receiver
        wr.imm_data = htobe32(slot);            // which slot: the receiver learns it from its completion
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = ring.addr + std::uint64_t{slot} * ring.chunk; // inside the ring (bad_ring())
        wr.wr.rdma.rkey = ring.rkey;
        ibv_send_wr *bad = nullptr;
        check_rc(ibv_post_send(id->qp, &wr, &bad), "ibv_post_send(RDMA WRITE with immediate)");
        c.slots[slot] = Slot{false, false}; // the receiver owns the slot, and the device our buffer
        //! [credit_loop]
        offset += len;
        progress.update(offset);
        if (test_fault().pause_ms > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(test_fault().pause_ms));
    }
    char extra = 0;
    if (offset != src.size || read_at(src.fd.get(), &extra, 1, offset) != 0 || changed_since_open(src))
        refuse(Error(quote(opt.file) +
                         " changed while it was being sent (its size or modification time differs from step 1)",
                     "send a file nobody is writing to (a copy or a snapshot)"));
    const Digest digest = sha.final();
    ControlMessage done = make_message(MessageType::done);
    done.length = offset;
    done.digest = digest;
    c.reply_due = true; // the verdict
    send(done);         // on RC it arrives after every WRITE before it
    progress.finish();
    result("%s  %s", hex(digest).c_str(), opt.file.c_str()); // sha256sum's format

    step(6, "receive the verdict, and compare the digest the receiver computed with ours");
    const ControlMessage verdict = expect_message(c, MessageType::verdict, "the verdict");
    if (verdict.flags > 1)
        refuse(Error("the receiver's verdict has flags " + std::to_string(verdict.flags) + "; expected 0 or 1",
                     "the receiver does not follow the protocol"));
    if (verdict.flags == 1 && verdict.digest != digest) // never success on the receiver's word alone
        throw Error("the receiver says the digests match, but it computed " + hex(verdict.digest) + ", not our " +
                        hex(digest) + ": not trusted",
                    "the receiver does not follow the protocol; do not rely on its copy");
    if (verdict.flags == 0 && verdict.digest == digest)
        throw Error("the receiver computed our digest " + hex(digest) + ", yet says they differ",
                    "the receiver does not follow the protocol");
    if (verdict.flags == 0)
        throw Error("the receiver computed " + hex(verdict.digest) + ", not " + hex(digest) + ": the data was damaged",
                    "nothing was kept on the receiver; send the file again");
    result("Receiver's digest matches ours: %s", hex(verdict.digest).c_str());

    step(7, "SEND our ID %s and receive the key", quote(opt.id).c_str());
    c.reply_due = true; // the key, a receipt or a refusal
    send(make_message(MessageType::id, opt.id));
    wait_until(c, "the key", [&] { return c.message.has_value(); });
    const bool is_key = c.message->type == static_cast<std::uint16_t>(MessageType::key);
    const ControlMessage answer = expect_message(c, is_key ? MessageType::key : MessageType::receipt, "the key");
    result("%s from receiver: %s", is_key ? "Key" : "Receipt", quote(answer.text, max_text).c_str());

    step(8, "disconnect (RDMA CM)");
    check_rc(rdma_disconnect(id.get()), "rdma_disconnect");
    if (!c.events.peer_gone)
        expect_cm_event(cm_channel.get(), RDMA_CM_EVENT_DISCONNECTED, args.timeout_s, "the disconnect", peer);
} // the QP (rdma_destroy_qp), chunk_mr, the buffers, cq, the cm_id, the channels, msg_mr, pd go here, in that order

} // namespace

int main(int argc, char **argv)
{
    SenderOptions opt;
    return run_sample(sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
