/**
 * @file sender.cpp
 * @brief Putting it together, sender side: send one file into the receiver's ring of slots, verified.
 *
 * The seven steps of the classic lab: connect (RDMA CM); SEND the length, the digest and the name;
 * receive the ring's addr, rkey, chunk and slots; RDMA WRITE the file chunk after chunk, each WRITE
 * carrying an immediate value that names its slot, and reuse a slot only when the receiver has sent
 * it back as a credit; SEND "done"; receive the verdict; SEND our ID and receive the key.
 * Memory is the ring's size, whatever the file's size. See receiver.cpp for the other side.
 */
#include "files.hpp"
#include "options.hpp"
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

/** The connection's state as the completions tell it: credits, and the receiver's last message. */
struct Connection {
    rdma_cm_id *id;
    ibv_cq *cq;
    ControlMessage *recv_buf; ///< where every message lands
    std::uint32_t recv_lkey;
    int timeout_s;
    std::vector<bool> credit;               ///< credit[s]: slot s is free at the receiver
    std::optional<ControlMessage> message;  ///< a message not yet read
    int sends = 0;                          ///< our SENDs and WRITEs not yet completed
};

/** Take completions until @p ready() holds; each completion's wr_id says what it is. Bounded by -t;
 *  a receiver that disconnects or refuses ends the wait with its reason. */
template <typename Ready> void wait_until(Connection &c, const std::string &what, Ready ready)
{
    Waiter waiter(c.timeout_s, what, c.id->verbs);
    while (!ready()) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(c.cq, 1, &wc)) == 0) {
            if (cm_event_ready(c.id->channel, 0)) { // DISCONNECTED: the receiver is gone
                rdma_cm_event *ev = nullptr;
                check_rc(rdma_get_cm_event(c.id->channel, &ev), "rdma_get_cm_event");
                const CmEventPtr event(ev);
                throw Error("the receiver went away (" + cm_event_name(event->event) + ") while we waited for " + what,
                            "the receiver's output says why; it may have been stopped");
            }
            waiter.pause();
            continue;
        }
        if (wc.wr_id == write_wr_id || wc.wr_id == send_wr_id) { // our WRITE or SEND was acknowledged
            check_wc(wc, wc.wr_id == write_wr_id ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, "our WRITE or SEND");
            --c.sends;
            continue;
        }
        check_wc(wc, IBV_WC_RECV, "a receive");
        if (wc.wc_flags & IBV_WC_WITH_IMM) { // a credit: zero bytes, the slot in the immediate value
            const std::uint32_t slot = be32toh(wc.imm_data);
            if (slot >= c.credit.size())
                throw Error("the receiver returned slot " + std::to_string(slot) + ", not one we use",
                            "the receiver does not follow the protocol");
            c.credit[slot] = true;
        } else {
            c.message = read_message(*c.recv_buf, wc.byte_len, "the receiver");
            if (c.message->type == static_cast<std::uint16_t>(MessageType::refusal)) {
                const std::string text = c.message->text;
                const std::size_t nl = text.find('\n');
                throw Error("the receiver refused: " + text.substr(0, nl),
                            nl == std::string::npos ? "the receiver's output says why" : text.substr(nl + 1));
            }
        }
        post_receives(c.id->qp, 1, c.recv_buf, c.recv_lkey); // give the receive back at once
    }
}

/** The receiver's next message, which must be of @p type. */
ControlMessage expect_message(Connection &c, MessageType type, const std::string &what)
{
    wait_until(c, what, [&] { return c.message.has_value(); });
    const ControlMessage m = *c.message;
    c.message.reset();
    if (m.type != static_cast<std::uint16_t>(type))
        throw Error("the receiver sent message type " + std::to_string(m.type) + " instead of " + what,
                    "the receiver does not follow the protocol");
    return m;
}

void run(const Args &args, const SenderOptions &opt)
{
    step(1, "open %s and compute its SHA-256: the digest goes out before the data", quote(opt.file).c_str());
    Source src = open_source(opt.file);
    const Digest digest = hash_file(src);
    result("%s  %s", hex(digest).c_str(), opt.file.c_str()); // sha256sum's format
    Device dev = open_device(args.device, args.gid_index);

    step(2, "connect to %s port %u with RDMA CM; rdma_create_qp() makes the QP", args.server_addr->c_str(),
         args.listen_port);
    SockAddr dst = parse_server_addr(*args.server_addr, args.server_addr_type, args.listen_port);
    const std::string peer = addr_to_string(dst.get());
    // Everything lives on librdmacm's own context of our device (rdma_create_qp() insists on it).
    ibv_context *verbs = cm_context(dev);
    PdPtr pd(check(ibv_alloc_pd(verbs), "ibv_alloc_pd"));
    const std::uint32_t depth = 2 * max_window + 4; // WRITEs and credits in flight, and the messages
    Buffer messages(2 * sizeof(ControlMessage)); // [0] receives, [1] sends
    auto *recv_buf = reinterpret_cast<ControlMessage *>(messages.data());
    MrPtr msg_mr(check(ibv_reg_mr(pd.get(), messages.data(), messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    EventChannelPtr channel = create_event_channel();
    CmIdPtr id;
    CqPtr cq;
    CmQp qp;
    //! [connect]
    for (const Deadline deadline(args.timeout_s);;) { // like a TCP client: again while nobody listens
        rdma_cm_id *raw_id = nullptr;
        check_rc(rdma_create_id(channel.get(), &raw_id, nullptr, RDMA_PS_TCP), "rdma_create_id");
        id.reset(raw_id);
        check_rc(rdma_resolve_addr(id.get(), nullptr, dst.get(), std::max(deadline.left_ms(), 1)), "rdma_resolve_addr");
        expect_cm_event(channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "the receiver's address", peer);
        check_cm_device(id.get(), dev); // the device that reaches ADDR must be the one -d names
        check_rc(rdma_resolve_route(id.get(), std::max(deadline.left_ms(), 1)), "rdma_resolve_route");
        expect_cm_event(channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "a route to the receiver", peer);
        // A CQ per try: the QP of a try that failed may leave flushed receives in its CQ.
        cq.reset(check(ibv_create_cq(verbs, static_cast<int>(2 * depth), nullptr, nullptr, 0), "ibv_create_cq"));
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = IBV_QPT_RC;
        init.cap = {.max_send_wr = depth, .max_recv_wr = max_window + 2, .max_send_sge = 1, .max_recv_sge = 1,
                    .max_inline_data = 0};
        check_rc(rdma_create_qp(id.get(), pd.get(), &init), "rdma_create_qp"); // librdmacm moves it INIT..RTS
        qp.reset(id.get());
        post_receives(id->qp, max_window + 2, recv_buf, msg_mr->lkey); // before the receiver can SEND
        rdma_conn_param param = cm_conn_param(id->qp);
        check_rc(rdma_connect(id.get(), &param), "rdma_connect");
        if (!cm_event_ready(channel.get(), deadline.left_ms()))
            throw timeout_error(args.timeout_s, "the receiver to accept", "is rdma_file_receiver running on " + peer + "?");
        rdma_cm_event *raw_ev = nullptr;
        check_rc(rdma_get_cm_event(channel.get(), &raw_ev), "rdma_get_cm_event");
        CmEventPtr ev(raw_ev);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
            break; // librdmacm took our QP to RTR and RTS and sent the RTU
        const bool nobody_listens = ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8; // IB CM reason 8
        if (!nobody_listens)
            throw Error("RDMA CM: " + cm_event_name(ev->event) + " (status " + std::to_string(ev->status) +
                            ") from " + peer, "is rdma_file_receiver there, with the same -lp, serving nobody else?");
        if (deadline.left_ms() < 200)
            throw Error("nobody listens on " + peer + " (RDMA_CM_EVENT_REJECTED, status 8)",
                        "start rdma_file_receiver there (with the same -lp), or raise -t");
        ev.reset();
        qp.reset(nullptr); // rdma_destroy_qp(), then a new cm_id for the next try
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    //! [connect]
    Connection c{id.get(), cq.get(), recv_buf, msg_mr->lkey, args.timeout_s, {}, {}, 0};
    auto send = [&](const ControlMessage &m) {
        post_send(id->qp, recv_buf + 1, msg_mr->lkey, m);
        ++c.sends;
        wait_until(c, "our SEND to complete", [&] { return c.sends == 0; });
    };

    step(3, "SEND the offer: %llu bytes, the digest and the name %s (protocol version %u)",
         static_cast<unsigned long long>(src.size), quote(opt.name).c_str(), test_fault().version);
    ControlMessage offer = make_message(MessageType::offer, opt.name);
    offer.version = htole16(test_fault().version); // (the test hook may announce another version)
    offer.length = src.size;
    offer.digest = digest;
    send(offer);

    step(4, "receive the ring (addr, rkey, chunk, slots) and register our own chunk buffers");
    const ControlMessage ring = expect_message(c, MessageType::ring, "the receiver's ring");
    const std::uint32_t slots = std::min(ring.slots, max_window);
    info("ring: addr 0x%llx, rkey 0x%x, %u slots of %u bytes; %u in flight at most",
         static_cast<unsigned long long>(ring.addr), ring.rkey, ring.slots, ring.chunk, slots);
    Buffer chunks(std::size_t{slots} * ring.chunk);
    // Our device only reads these bytes (the WRITEs' source): no access flag is needed.
    MrPtr chunk_mr(check(ibv_reg_mr(pd.get(), chunks.data(), chunks.size(), 0), "ibv_reg_mr"));
    c.credit.assign(slots, true); // every slot starts free

    step(5, "WRITE the file chunk after chunk, each with an immediate naming its slot; reuse a slot on its credit");
    Progress progress(src.size, "sent");
    Sha256 again; // the bytes as they leave: a file that changes while it is sent is caught here
    std::uint64_t offset = 0;
    for (std::uint64_t k = 0; offset < src.size; ++k) {
        //! [credit_loop]
        const std::uint32_t slot = static_cast<std::uint32_t>(k % slots);
        wait_until(c, "the credit of slot " + std::to_string(slot), [&] { return c.credit[slot]; });
        char *local = chunks.data() + std::size_t{slot} * ring.chunk;
        const std::size_t want = std::min<std::uint64_t>(ring.chunk, src.size - offset);
        const std::size_t len = read_at(src.fd.get(), local, want, offset);
        if (len != want)
            break; // the file shrank: the check below says so
        again.update(local, len);
        if (k == 0 && test_fault().corrupt)
            local[0] = static_cast<char>(local[0] ^ 1); // test only: damage the data after hashing it
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), static_cast<std::uint32_t>(len), chunk_mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = write_wr_id;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; // the bytes into the slot, and a completion for the receiver
        wr.imm_data = htobe32(slot);            // which slot: the receiver learns it from its completion
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = ring.addr + std::uint64_t{slot} * ring.chunk;
        wr.wr.rdma.rkey = ring.rkey;
        ibv_send_wr *bad = nullptr;
        check_rc(ibv_post_send(id->qp, &wr, &bad), "ibv_post_send(RDMA WRITE with immediate)");
        ++c.sends;
        c.credit[slot] = false; // the receiver owns the slot until it sends it back
        //! [credit_loop]
        offset += len;
        progress.update(offset);
        if (test_fault().pause_ms > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(test_fault().pause_ms));
    }
    char extra = 0;
    if (offset != src.size || read_at(src.fd.get(), &extra, 1, offset) != 0 || again.final() != digest) {
        send(make_message(MessageType::refusal, "the file changed while it was being sent\nsend it again"));
        throw Error(quote(opt.file) + " changed while it was being sent (its size or digest differs from step 1)",
                    "send a file nobody is writing to (a copy or a snapshot)");
    }
    post_send(id->qp, nullptr, 0, {}, done_imm); // on RC it arrives after every WRITE before it
    ++c.sends;
    progress.finish();

    step(6, "receive the verdict: does the receiver's SHA-256 match ours?");
    const ControlMessage verdict = expect_message(c, MessageType::verdict, "the verdict");
    if (verdict.flags != 1)
        throw Error("the receiver computed " + hex(verdict.digest) + ", not " + hex(digest) + ": the data was damaged",
                    "nothing was kept on the receiver; send the file again");
    result("Receiver's digest matches: %s", hex(verdict.digest).c_str());

    step(7, "SEND our ID %s and receive the key", quote(opt.id).c_str());
    send(make_message(MessageType::id, opt.id));
    wait_until(c, "the key", [&] { return c.message.has_value(); });
    const bool is_key = c.message->type == static_cast<std::uint16_t>(MessageType::key);
    const ControlMessage answer = expect_message(c, is_key ? MessageType::key : MessageType::receipt, "the key");
    result("%s from receiver: \"%s\"", is_key ? "Key" : "Receipt", answer.text);

    step(8, "disconnect (RDMA CM)");
    wait_until(c, "our SENDs to complete", [&] { return c.sends == 0; });
    check_rc(rdma_disconnect(id.get()), "rdma_disconnect");
    expect_cm_event(channel.get(), RDMA_CM_EVENT_DISCONNECTED, args.timeout_s, "the disconnect", peer);
} // chunk_mr, msg_mr, the QP (rdma_destroy_qp), cq, pd, the cm_id and the channel go here, in that order

} // namespace

int main(int argc, char **argv)
{
    SenderOptions opt;
    return run_sample(sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
