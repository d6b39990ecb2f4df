/**
 * @file receiver.cpp
 * @brief Putting it together, receiver side: export a ring of slots, write each chunk to disk, return
 * the slot as a credit, verify the SHA-256, keep the file only if it matches, answer the ID with a key.
 *
 * The receiver listens (RDMA CM), and sleeps on a completion channel instead of spinning: arm the CQ
 * (ibv_req_notify_cq), sleep until it fires (ibv_get_cq_event), acknowledge (ibv_ack_cq_events), poll
 * until the CQ is empty, re-arm. Memory is the ring (--slots x --chunk), whatever the file's size.
 * See sender.cpp for the other side.
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

#include <poll.h>

using namespace rdma_samples;
using namespace file_transfer;

namespace {

/** What the waits need: the CQ and its channel, the CM's channel, -t. */
struct Connection {
    ibv_cq *cq;
    ibv_comp_channel *channel;
    rdma_event_channel *cm_channel;
    int timeout_s;
    int sends = 0; ///< our SENDs not yet completed
};

/** A second sender while we serve one: refuse its request (it sees REJECTED), forget its cm_id. */
void turn_away(CmEventPtr ev)
{
    rdma_cm_id *other = ev->id;
    check_rc(rdma_reject(other, nullptr, 0), "rdma_reject");
    ev.reset(); // acknowledge the event before destroying its id
    rdma_destroy_id(other);
}

/** The next completion, sleeping on the completion channel while there is none (bounded by -t). */
ibv_wc next_completion(Connection &c, const std::string &what)
{
    //! [event_loop]
    const Deadline deadline(c.timeout_s);
    for (;;) {
        ibv_wc wc{};
        if (check_poll(ibv_poll_cq(c.cq, 1, &wc)) == 1) // poll until empty: one per call
            return wc;
        // Empty: arm the CQ, so that its NEXT completion raises an event on the channel. The race: a
        // completion that came after the poll above but before the arm raises no event, and we would
        // sleep through it. So poll once more AFTER arming; sleep only if that finds nothing too.
        check_rc(ibv_req_notify_cq(c.cq, 0), "ibv_req_notify_cq");
        if (check_poll(ibv_poll_cq(c.cq, 1, &wc)) == 1)
            return wc; // (the armed event fires later; the next sleep takes it and polls again)
        // Sleep on two file descriptors: the completion channel, and the CM's (a sender that goes away
        // sends a DREQ: DISCONNECTED). poll() bounds the sleep by -t; ibv_get_cq_event() alone would not.
        pollfd fds[2] = {{c.channel->fd, POLLIN, 0}, {c.cm_channel->fd, POLLIN, 0}};
        if (poll(fds, 2, deadline.left_ms()) <= 0)
            throw timeout_error(c.timeout_s, what, "is the sender still running? its output says why it stopped");
        if (fds[1].revents & POLLIN) {
            rdma_cm_event *ev = nullptr;
            check_rc(rdma_get_cm_event(c.cm_channel, &ev), "rdma_get_cm_event");
            CmEventPtr event(ev);
            if (event->event == RDMA_CM_EVENT_DISCONNECTED)
                throw Error("the sender went away (RDMA_CM_EVENT_DISCONNECTED) while we waited for " + what,
                            "the sender's output says why; a file not yet verified (step 5) is not kept");
            if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
                turn_away(std::move(event));
        }
        if (fds[0].revents & POLLIN) {
            ibv_cq *ev_cq = nullptr;
            void *ev_ctx = nullptr;
            check_rc(ibv_get_cq_event(c.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event"); // take the event...
            ibv_ack_cq_events(ev_cq, 1); // ... and acknowledge it: ibv_destroy_cq() waits for every one
        }
    }
    //! [event_loop]
}

/** The next thing the sender sent, in order (a message, a chunk, "done"); our SENDs' completions are
 *  checked on the way. */
ibv_wc next_arrival(Connection &c, const std::string &what)
{
    for (;;) {
        const ibv_wc wc = next_completion(c, what);
        if (wc.wr_id == send_wr_id) { // our SEND (a message or a credit) was acknowledged
            check_wc(wc, IBV_WC_SEND, "our SEND");
            --c.sends;
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS) // (a receive's opcode is known only once it succeeded)
            check_wc(wc, IBV_WC_RECV, "a receive");
        return wc;
    }
}

void run(const Args &args, const ReceiverOptions &opt)
{
    step(1, "open the device, check a ring of %u x %u bytes against its limits, listen on port %u", opt.slots,
         opt.chunk, args.listen_port);
    Device dev = open_device(args.device, args.gid_index);
    ibv_device_attr attr{};
    check_rc(ibv_query_device(dev.ctx.get(), &attr), "ibv_query_device");
    check_ring_fits(attr, dev.name, opt.slots, opt.chunk); // max_mr_size, max_qp_wr
    const std::uint64_t ring_size = std::uint64_t{opt.slots} * opt.chunk;
    const std::map<std::string, std::string> keys = opt.keys_file.empty() ? decltype(keys){} : load_keys(opt.keys_file);
    CmConnection listener = cm_listen(args.listen_port); // rdma_create_id, rdma_bind_addr, rdma_listen (cm.cpp)
    info("listening on port %u; waiting up to %d s for the sender", args.listen_port, args.timeout_s);

    step(2, "accept the sender: on its CONNECT_REQUEST, make the QP with rdma_create_qp() and export the ring");
    CmIdPtr id;
    PdPtr pd;
    CompChannelPtr channel;
    CqPtr cq;
    CmQp qp;
    Buffer ring(ring_size), messages(2 * sizeof(ControlMessage)); // messages: [0] receives, [1] sends
    auto *recv_buf = reinterpret_cast<ControlMessage *>(messages.data());
    MrPtr ring_mr, msg_mr;
    //! [accept]
    for (const Deadline deadline(args.timeout_s);;) {
        if (!cm_event_ready(listener.channel.get(), deadline.left_ms()))
            throw timeout_error(args.timeout_s, "the sender to connect", "start rdma_file_sender -sa ADDR FILE");
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(listener.channel.get(), &raw), "rdma_get_cm_event");
        CmEventPtr ev(raw);
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == id.get())
            break; // the sender's RTU: connected
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            throw Error("RDMA CM: " + cm_event_name(ev->event) + " before the connection was up", "check the sender's output");
        if (id) { // one sender at a time
            turn_away(std::move(ev));
            continue;
        }
        id.reset(ev->id); // the request's new cm_id is this connection's
        check_cm_device(id.get(), dev);
        pd.reset(check(ibv_alloc_pd(id->verbs), "ibv_alloc_pd")); // on the CM's device context
        channel.reset(check(ibv_create_comp_channel(id->verbs), "ibv_create_comp_channel"));
        const std::uint32_t depth = 2 * opt.slots + 4; // credits and messages in flight
        cq.reset(check(ibv_create_cq(id->verbs, static_cast<int>(2 * depth), nullptr, channel.get(), 0), "ibv_create_cq"));
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = IBV_QPT_RC;
        init.cap = {.max_send_wr = depth, .max_recv_wr = opt.slots + 2, .max_send_sge = 1, .max_recv_sge = 1,
                    .max_inline_data = 0};
        check_rc(rdma_create_qp(id.get(), pd.get(), &init), "rdma_create_qp");
        qp.reset(id.get());
        // The ring: the sender WRITEs into it (remote write; local write, which remote write requires).
        ring_mr.reset(check(ibv_reg_mr(pd.get(), ring.data(), ring.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                            "ibv_reg_mr(ring)"));
        msg_mr.reset(check(ibv_reg_mr(pd.get(), messages.data(), messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
        // One receive per slot (each WRITE with immediate consumes one), one for a message, one spare.
        post_receives(id->qp, opt.slots + 2, recv_buf, msg_mr->lkey);
        rdma_conn_param param = cm_conn_param(id->qp);
        check_rc(rdma_accept(id.get(), &param), "rdma_accept"); // librdmacm moves our QP to RTR and RTS
    }
    //! [accept]
    info("connected to %s", addr_to_string(rdma_get_peer_addr(id.get())).c_str());
    Connection c{cq.get(), channel.get(), listener.channel.get(), args.timeout_s};
    auto send = [&](const ControlMessage &m) {
        post_send(id->qp, recv_buf + 1, msg_mr->lkey, m);
        ++c.sends;
    };
    auto refuse = [&](const Error &e) { // tell the sender why we stop, then stop with that reason
        send(make_message(MessageType::refusal, std::string(e.what()) + "\n" + e.hint()));
        try { // until it is delivered, or the sender, which has read it, disconnects (or -t runs out)
            while (c.sends > 0)
                next_arrival(c, "our refusal to be delivered");
        } catch (const Error &) {
        }
        throw e;
    };

    step(3, "receive the offer, check the name and the destination, SEND the ring");
    ibv_wc wc = next_arrival(c, "the sender's offer");
    ControlMessage offer{};
    std::string dest;
    std::optional<PartFile> file;
    try {
        offer = read_message(*recv_buf, wc.byte_len, "the sender");
        dest = destination(opt.out, offer.text); // -o DIR: the sender's name, checked
        file.emplace(dest, opt.force);
    } catch (const Error &e) {
        refuse(e);
    }
    post_receives(id->qp, 1, recv_buf, msg_mr->lkey);
    info("offer: %s, %llu bytes, sha256 %s; writing %s", quote(offer.text).c_str(),
         static_cast<unsigned long long>(offer.length), hex(offer.digest).c_str(), dest.c_str());
    ControlMessage ring_msg = make_message(MessageType::ring);
    ring_msg.addr = reinterpret_cast<std::uintptr_t>(ring.data());
    ring_msg.rkey = ring_mr->rkey;
    ring_msg.chunk = opt.chunk;
    ring_msg.slots = opt.slots;
    send(ring_msg);

    step(4, "for each chunk: write its slot to disk, hash it, SEND the slot back as a credit");
    Progress progress(offer.length, "received");
    Sha256 sha;
    std::uint64_t received = 0;
    for (;;) {
        //! [chunk_loop]
        wc = next_arrival(c, "the next chunk");
        const std::uint32_t imm = be32toh(wc.imm_data);
        if (wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) && imm == done_imm)
            break; // "done": on RC it comes after every WRITE the sender posted before it
        if (wc.opcode == IBV_WC_RECV) // the sender stopped (its file changed): it says why
            throw Error("the sender stopped: " + std::string(read_message(*recv_buf, wc.byte_len, "the sender").text), "");
        const std::uint64_t expected = std::min<std::uint64_t>(opt.chunk, offer.length - received);
        if (imm >= opt.slots || wc.byte_len != expected)
            throw Error("a WRITE of " + std::to_string(wc.byte_len) + " bytes into slot " + std::to_string(imm) +
                            "; expected " + std::to_string(expected) + " bytes into one of " + std::to_string(opt.slots),
                        "the sender does not follow the protocol");
        const char *slot = ring.data() + std::size_t{imm} * opt.chunk;
        try {
            file->write(slot, wc.byte_len); // disk full: the sender hears why
        } catch (const Error &e) {
            refuse(e);
        }
        sha.update(slot, wc.byte_len);
        received += wc.byte_len;
        post_receives(id->qp, 1, recv_buf, msg_mr->lkey); // the next WRITE into this slot needs a receive
        post_send(id->qp, nullptr, 0, {}, imm); // the credit, zero bytes: "slot imm is yours again"
        ++c.sends;
        //! [chunk_loop]
        progress.update(received);
    }
    progress.finish();

    step(5, "compare the digests; keep the file (fsync, rename) only if they match; SEND the verdict");
    ControlMessage verdict = make_message(MessageType::verdict);
    verdict.digest = sha.final();
    verdict.flags = received == offer.length && verdict.digest == offer.digest ? 1 : 0;
    if (verdict.flags == 1)
        file->commit();
    send(verdict);
    if (verdict.flags != 1)
        throw Error("the data's SHA-256 is " + hex(verdict.digest) + ", the sender announced " + hex(offer.digest),
                    "the data was damaged on the way, or the file changed while it was sent; nothing was kept");
    result("%s  %s", hex(verdict.digest).c_str(), dest.c_str()); // sha256sum's format

    step(6, "receive the sender's ID; SEND its key (step 7), or a receipt without --keys");
    wc = next_arrival(c, "the sender's ID");
    const std::string who = read_message(*recv_buf, wc.byte_len, "the sender").text;
    const std::string receipt = "received " + std::to_string(received) + " bytes, sha256 " + hex(verdict.digest);
    send(answer_id(keys, who, receipt)); // a key, a receipt, or a refusal of an unknown ID
    const char *how = keys.empty() ? "a receipt" : keys.count(who) > 0 ? "its key" : "a refusal (unknown ID)";
    result("Answered %s with %s", quote(who).c_str(), how);

    step(7, "wait for the sender to disconnect");
    // The sender disconnects once it has our answer: its DREQ proves the last SEND arrived, whether or
    // not we have polled its completion yet (the QP then flushes whatever is left).
    expect_cm_event(listener.channel.get(), RDMA_CM_EVENT_DISCONNECTED, args.timeout_s, "the sender to disconnect",
                    "the sender");
    rdma_disconnect(id.get()); // answers the sender's DREQ
} // the file (removed unless committed), the MRs, the QP (rdma_destroy_qp), cq, channel, pd, cm_ids go here

} // namespace

int main(int argc, char **argv)
{
    ReceiverOptions opt;
    return run_sample(receiver_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
