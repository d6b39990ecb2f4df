/**
 * @file receiver.cpp
 * @brief Putting it together, receiver side: export a ring of slots, take each chunk out of the
 * sender's reach, return the slot as a credit, hash and write the chunk, verify the SHA-256 the sender
 * sends with "done", keep the file only if it matches, answer the ID with a key.
 *
 * The receiver listens (RDMA CM), and sleeps on a completion channel instead of spinning (events.hpp).
 * Everything the sender sends is checked before it is used (peer_checks.hpp): every message's magic,
 * version, type and text, every chunk's slot and length, the order of the steps. Memory is the ring
 * (--slots x --chunk) and one chunk more, whatever the file's size. See sender.cpp for the other side.
 */
#include "connection.hpp"
#include "peer_checks.hpp"
#include "support/destination.hpp"
#include "support/files.hpp"
#include "support/keys.hpp"
#include "support/part_file.hpp"
#include "support/options.hpp"
#include "support/test_fault.hpp"

#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

#include <cerrno>
#include <cstring>

using namespace rdma_samples;
using namespace rdma_file_transfer;

namespace {

/** The sender's next message (not a chunk, not a SEND with immediate), of @p type; anything else is
 *  refused: the sender hears why. */
ControlMessage next_message(Link &link, MessageType type, const std::string &what)
{
    return link.refuse_on_error([&] {
        const ibv_wc wc = link.next(what);
        check_is_message(wc, what);
        const ControlMessage m = read_message(link.msgs[0], wc.byte_len, "the sender");
        expect_type(m, type, "the sender", what);
        return m;
    });
}

void run(const Args &args, const ReceiverOptions &opt)
{
    check_receiver_options(opt); // -o given, the ring within max_ring_bytes
    step(1, "open the device, check a ring of %u x %u bytes against its limits, listen on port %u", opt.slots,
         opt.chunk, args.listen_port);
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // its WRITEs and credits carry immediates: none on siw
    ibv_device_attr attr{};
    check_rc(ibv_query_device(dev.ctx.get(), &attr), "ibv_query_device");
    check_ring_fits(attr, dev.name, opt.slots, opt.chunk);     // max_mr_size, max_qp_wr, max_cqe
    const std::optional<Keys> keys = load_keys(opt.keys_file); // none without --keys: every ID gets a receipt
    CmConnection listener = cm_listen(dev, args.listen_port);  // rdma_create_id, rdma_bind_addr, rdma_listen (cm.cpp)
    info("listening on port %u; waiting up to %d s for the sender", args.listen_port, args.timeout_s);

    step(2, "accept the sender: on its CONNECT_REQUEST, make the QP with rdma_create_qp() and export the ring");
    // Declared in the order of creation, so that they go in reverse: the QP before the MRs it uses.
    CmIdPtr id;
    PdPtr pd;
    CompChannelPtr channel;
    CqPtr cq;
    Buffer ring(std::uint64_t{opt.slots} * opt.chunk), messages(2 * sizeof(ControlMessage)); // [0] receives, [1] sends
    auto *msgs = reinterpret_cast<ControlMessage *>(messages.data());
    MrPtr ring_mr, msg_mr;
    CmQp qp;
    // A sender that gives up before the connection is up (its REJ, an error) leaves nobody to serve:
    // what was made for it goes, in reverse, and we listen again, within the same -t.
    auto forget_sender = [&](const std::string &why) {
        info("the sender gave up before the connection was up (%s); listening again", why.c_str());
        qp.reset(nullptr);
        msg_mr.reset();
        ring_mr.reset();
        cq.reset();
        channel.reset();
        pd.reset();
        id.reset();
    };
    //! [accept]
    for (const Deadline deadline(args.timeout_s);;) {
        // The clock first: a stream of connection requests must not keep this wait open past -t.
        if (deadline.expired() || !cm_event_ready(listener.channel.get(), deadline.left_ms()))
            throw timeout_error(args.timeout_s, "the sender to connect", "start rdma_file_sender -sa ADDR FILE");
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &raw), "rdma_get_cm_event");
        CmEventPtr ev(raw);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == id.get())
            break;                      // the sender's RTU: connected
        if (id && ev->id == id.get()) { // REJECTED, CONNECT_ERROR, DISCONNECTED...: the sender is gone
            const std::string why = cm_event_name(ev->event);
            ev.reset(); // acknowledged before its cm_id goes
            forget_sender(why);
            continue;
        }
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            throw Error("RDMA CM: " + cm_event_name(ev->event) + " before the connection was up",
                        "check the sender's output");
        if (id) { // one sender at a time
            refuse_request(ev, "one sender at a time: another is being served");
            continue;
        }
        id.reset(ev->id); // the request's new cm_id is this connection's
        check_cm_device(id.get(), dev);
        pd.reset(check(ibv_alloc_pd(id->verbs), "ibv_alloc_pd")); // on the CM's device context
        channel.reset(check(ibv_create_comp_channel(id->verbs), "ibv_create_comp_channel"));
        const std::uint32_t recv_depth = receiver_recv_depth(opt.slots), send_depth = receiver_send_depth(opt.slots);
        cq.reset(check(ibv_create_cq(id->verbs, static_cast<int>(recv_depth + send_depth), nullptr, channel.get(), 0),
                       "ibv_create_cq"));
        // The ring: the sender WRITEs into it (remote write; local write, which remote write requires).
        // Registered at I/O virtual address 0: the sender addresses slot s as 0 + s x chunk, and learns
        // nothing of where the ring sits in our address space.
        ring_mr.reset(check(
            ibv_reg_mr_iova(pd.get(), ring.data(), ring.size(), 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            "ibv_reg_mr_iova(ring)"));
        msg_mr.reset(
            check(ibv_reg_mr(pd.get(), messages.data(), messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
        ibv_qp_init_attr init = qp_init_attr(cq.get(), send_depth, recv_depth);
        if (rdma_create_qp(id.get(), pd.get(), &init) != 0) { // (a request already given up: EINVAL)
            forget_sender(std::string("rdma_create_qp: ") + std::strerror(errno));
            continue;
        }
        qp.reset(id.get());
        post_receives(id->qp, recv_depth, msgs, msg_mr->lkey); // before the sender can SEND
        rdma_conn_param param = cm_conn_param(id->qp);
        if (rdma_accept(id.get(), &param) != 0)                                 // librdmacm moves our QP to RTR and RTS
            forget_sender(std::string("rdma_accept: ") + std::strerror(errno)); // (its REJ came first: EINVAL)
    }
    //! [accept]
    info("connected to %s", addr_to_string(rdma_get_peer_addr(id.get())).c_str());
    grant_only(id->qp, IBV_ACCESS_REMOTE_WRITE); // the chunks; nothing else of ours is the sender's
    trace_qp_timers(id->qp);                     // (-v: the ACK timeout and retry counts librdmacm gave the QP)
    Link link{.events = {.cq = cq.get(),
                         .channel = channel.get(),
                         .cm_channel = listener.channel.get(),
                         .timeout_s = args.timeout_s,
                         .transfer = Deadline(opt.deadline_s),
                         .peer = "the sender"},
              .qp = id->qp,
              .msgs = msgs,
              .lkey = msg_mr->lkey,
              .send_depth = static_cast<int>(receiver_send_depth(opt.slots))};

    step(3, "receive the offer, check the name and the destination, SEND the ring");
    const ControlMessage offer = next_message(link, MessageType::offer, "the sender's offer");
    const Destination dest = link.refuse_on_error([&] { return destination(opt.out, offer.text); }); // the name checked
    PartFile file = link.refuse_on_error([&] { return PartFile(dest, opt.force); }); // the directory opened once
    link.refuse_on_error([&] { file.check_room(offer.length, opt.max_size); });      // --max-size, the free space
    link.post_receive();
    info("offer: %s, %llu bytes; writing %s", quote(offer.text).c_str(), static_cast<unsigned long long>(offer.length),
         quote(dest.path()).c_str());
    ControlMessage ring_msg = make_message(MessageType::ring);
    ring_msg.addr = 0; // the ring's I/O virtual address (ibv_reg_mr_iova above)
    ring_msg.rkey = ring_mr->rkey;
    ring_msg.chunk = opt.chunk;
    ring_msg.slots = opt.slots;
    link.post_message(ring_msg);

    step(4, "for each chunk: copy its slot out of the sender's reach, SEND the credit, hash and write the copy");
    Progress progress(offer.length, "received");
    Sha256 sha;
    std::vector<char> copy(std::min<std::uint64_t>(opt.chunk, std::max<std::uint64_t>(offer.length, 1)));
    std::uint64_t received = 0;
    ControlMessage done{};
    link.refuse_on_error([&] {
        for (;;) {
            //! [chunk_loop]
            const ibv_wc wc = link.next("the next chunk");
            if (wc.opcode == IBV_WC_RECV && !(wc.wc_flags & IBV_WC_WITH_IMM)) { // a message: "done", or why it stops
                done = read_message(link.msgs[0], wc.byte_len, "the sender");
                expect_type(done, MessageType::done, "the sender", "the next chunk or \"done\"");
                break; // on RC it comes after every WRITE the sender posted before it
            }
            // A chunk: a WRITE with immediate into one of our slots, as long as the offer leaves.
            const std::uint32_t slot = check_chunk(wc, opt.slots, opt.chunk, received, offer.length);
            // The sender's rkey covers the whole ring until "done": it can WRITE this slot again at any
            // time. So the slot is copied once, and only the copy is hashed and written: the bytes on
            // disk are always the bytes in the digest.
            std::memcpy(copy.data(), ring.data() + std::size_t{slot} * opt.chunk, wc.byte_len);
            link.post_receive();                  // the next WRITE into this slot needs a receive
            link.post_credit(slot);               // the credit, zero bytes: "slot is yours again"
            sha.update(copy.data(), wc.byte_len); // hash and write while the sender refills the slot
            file.write(copy.data(), wc.byte_len);
            received += wc.byte_len;
            //! [chunk_loop]
            progress.update(received);
            test_sleep(test_fault().busy_ms); // (tests only: the next chunks wait in the CQ meanwhile)
        }
        ring_mr.reset(); // ibv_dereg_mr(): nothing of the ring is writable any more
        check_done(done, received, offer.length);
    }); // disk full, a lie, the sender's own refusal: the sender hears why (its refusal comes back, changing nothing)
    progress.finish();

    step(5, "compare the digests; keep the file (fsync, then its name) only if they match; SEND the verdict");
    ControlMessage verdict = make_message(MessageType::verdict);
    verdict.digest = sha.final();
    verdict.flags = verdict.digest == done.digest ? 1 : 0;
    if (verdict.flags != 1) {
        link.post_message(verdict);
        link.deliver(); // a NIC may not have sent it yet when we tear the QP down
        throw digest_mismatch(verdict.digest, done.digest);
    }
    link.refuse_on_error([&] { file.commit(); });
    result("%s  %s", hex(verdict.digest).c_str(), shown_path(dest.path()).c_str()); // sha256sum's format
    // From here the file is kept: what fails afterwards (a sender that never sends its ID or never
    // disconnects, a QP broken by a late WRITE) does not undo it, and ends as a warning that says so.
    after_result("the file was verified and kept as " + shown_path(dest.path()), [&] {
        link.post_message(verdict);

        step(6, "receive the sender's ID; SEND its key (step 7), or a receipt without --keys");
        const std::string who = next_message(link, MessageType::id, "the sender's ID").text;
        const ControlMessage answer = answer_id(keys, who, received, verdict.digest); // a key, a receipt or a refusal
        link.post_message(answer);
        result("Answered %s with %s", quote(who).c_str(), answer_name(answer));

        step(7, "wait for the sender to disconnect");
        // The sender disconnects once it has our answer: its DREQ proves the last SEND arrived, whether or
        // not we have polled its completion yet (the QP then flushes whatever is left).
        link.deliver();
        wait_disconnected(link.events, "the sender to disconnect"); // (another sender meanwhile: refused)
        rdma_disconnect(id.get());                                  // answers the sender's DREQ
    });
} // the QP (rdma_destroy_qp), the MRs, the file (removed unless committed), cq, channel, pd, cm_ids go here

} // namespace

int main(int argc, char **argv)
{
    ReceiverOptions opt;
    return run_sample(receiver_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
