/**
 * @file sender.cpp
 * @brief Putting it together, sender side: send one file into the receiver's ring of slots, verified.
 *
 * The seven steps of the classic lab: connect (RDMA CM); SEND the length and the name; receive the
 * ring's addr, rkey, chunk and slots; RDMA WRITE the file chunk after chunk, hashing each as it is read,
 * each WRITE carrying an immediate value that names its slot, and reuse a slot only when our WRITE into
 * it completed and the receiver sent the slot back as a credit; SEND "done" with the digest; receive the
 * verdict and check it against our own digest; SEND our ID and receive the key. Like the receiver, it
 * sleeps on a completion channel (events.hpp), and checks everything the receiver sends before using it
 * (peer_checks.hpp); credits.hpp keeps the books of the slots. Memory is at most the ring's size, and
 * never more than the file's size. See receiver.cpp.
 */
#include "connection.hpp"
#include "credits.hpp"
#include "peer_checks.hpp"
#include "support/files.hpp"
#include "support/options.hpp"
#include "support/test_fault.hpp"

#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

using namespace rdma_samples;
using namespace rdma_file_transfer;

namespace {

/** The most chunks we keep in flight: one receive each for their credits (our receive queue's size). */
constexpr std::uint32_t max_window = 1024;

void run(const Args &args, const SenderOptions &opt)
{
    step(1, "open %s and the device: the file is hashed as it is sent, not before", quote(opt.file).c_str());
    Source src = open_source(opt.file);
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // its WRITEs and credits carry immediates: none on siw

    step(2, "connect to %s port %u with RDMA CM; rdma_create_qp() makes the QP", args.server_addr->c_str(),
         args.listen_port);
    // Everything lives on librdmacm's own context of our device (rdma_create_qp() insists on it).
    ibv_context *verbs = cm_context(dev);
    PdPtr pd(check(ibv_alloc_pd(verbs), "ibv_alloc_pd"));
    Buffer messages(2 * sizeof(ControlMessage)); // [0] receives, [1] sends
    auto *msgs = reinterpret_cast<ControlMessage *>(messages.data());
    MrPtr msg_mr(check(ibv_reg_mr(pd.get(), messages.data(), messages.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    CompChannelPtr channel(check(ibv_create_comp_channel(verbs), "ibv_create_comp_channel"));
    // Declared in the order of creation, so that they go in reverse: the QP before the MRs it uses.
    CmConnection cm; // the event channel and cm_id of the try that connected
    CqPtr cq;
    std::optional<Buffer> chunks; // (made in step 4, once the ring's geometry is known)
    MrPtr chunk_mr;
    CmQp qp;
    //! [connect]
    // Like a TCP client, again while nobody listens: cm_retry() (chapter 9) gives each try a new cm_id.
    cm = cm_retry(args.cm_server(), args.timeout_s, nullptr, [&](CmTry &this_try) {
        rdma_cm_id *id = this_try.conn.id.get();
        if (!this_try.resolve(dev)) // address and route (rdma_write's step 4); the device must be the one -d names
            return false;
        // A CQ per try: the QP of a try that failed may leave flushed receives in its CQ.
        const std::uint32_t send_depth = max_window + 4, recv_depth = max_window + 2; // WRITEs, messages; credits
        cq.reset(check(ibv_create_cq(verbs, static_cast<int>(send_depth + recv_depth), nullptr, channel.get(), 0),
                       "ibv_create_cq"));
        ibv_qp_init_attr init = qp_init_attr(cq.get(), send_depth, recv_depth);
        check_rc(rdma_create_qp(id, pd.get(), &init), "rdma_create_qp"); // librdmacm moves it INIT..RTS
        CmQp try_qp(id); // (a failed try's QP goes before cm_retry() destroys its cm_id)
        post_receives(id->qp, recv_depth, msgs, msg_mr->lkey); // before the receiver can SEND
        rdma_conn_param param = cm_conn_param(id->qp);
        check_rc(rdma_connect(id, &param), "rdma_connect");
        if (!established(this_try, args.timeout_s)) // ESTABLISHED: librdmacm took our QP to RTR and RTS, sent the RTU
            return false;
        qp = std::move(try_qp);
        return true;
    });
    //! [connect]
    grant_only(qp.id->qp, 0);   // the receiver may not WRITE, READ or use atomics on us at all
    trace_qp_timers(qp.id->qp); // (-v: the ACK timeout and retry counts librdmacm gave the QP)
    Connection conn{.link = {.events = {.cq = cq.get(),
                                        .channel = channel.get(),
                                        .cm_channel = cm.channel.get(),
                                        .timeout_s = args.timeout_s,
                                        .transfer = Deadline(opt.deadline_s),
                                        .peer = "the receiver"},
                             .qp = qp.id->qp,
                             .msgs = msgs,
                             .lkey = msg_mr->lkey,
                             .send_depth = 4}}; // messages: our WRITEs have the rest of the queue (max_window)
    auto send = [&](const ControlMessage &m) {  // and wait until it is delivered
        conn.link.post_message(m);
        wait_until(conn, "our SEND to complete", [&] { return conn.link.sends == 0; });
    };

    step(3, "SEND the offer: %llu bytes, the name %s (protocol version %u)", static_cast<unsigned long long>(src.size),
         quote(opt.name).c_str(), test_fault().version);
    ControlMessage offer = make_message(MessageType::offer, opt.name);
    offer.version = htole16(test_fault().version); // (the test hook may announce another version)
    offer.length = src.size;
    conn.turn = Turn::receiver; // the ring, or a refusal
    send(offer);

    step(4, "receive the ring (addr, rkey, chunk, slots), check it, and register our own chunk buffers");
    const ControlMessage ring = expect_message(conn, MessageType::ring, "the receiver's ring");
    if (const std::optional<Error> why = bad_ring(ring))
        conn.link.refuse(*why);
    // Only what the file needs, whatever ring the receiver grants: never more buffers than the file
    // fills whole (at least one), so the bytes we pin never exceed the file's size. A 100-byte file into
    // a ring of 4 x 1 MiB takes one buffer of 100 bytes; a file of 1 MiB + 1 byte, one buffer of 1 MiB.
    const std::size_t buffer_size = static_cast<std::size_t>(std::min<std::uint64_t>(ring.chunk, src.size));
    const std::uint64_t full_buffers = std::max<std::uint64_t>(src.size / std::max<std::size_t>(buffer_size, 1), 1);
    const auto used = static_cast<std::uint32_t>(std::min<std::uint64_t>({ring.slots, max_window, full_buffers}));
    info("ring: addr 0x%llx, rkey 0x%x, %u slots of %u bytes; %u in flight at most (%llu bytes of buffers)",
         static_cast<unsigned long long>(ring.addr), ring.rkey, ring.slots, ring.chunk, used,
         static_cast<unsigned long long>(std::uint64_t{used} * buffer_size));
    chunks.emplace(std::max<std::size_t>(std::size_t{used} * buffer_size, 1));
    // Our device only reads these bytes (the WRITEs' source): no access flag is needed.
    chunk_mr.reset(check(ibv_reg_mr(pd.get(), chunks->data(), chunks->size(), 0), "ibv_reg_mr"));
    conn.slots.assign(used, Slot{});

    step(5, "read, hash and WRITE the file chunk after chunk, each with an immediate naming its slot");
    Progress progress(src.size, "sent");
    Sha256 sha; // one pass: the bytes as they leave
    std::uint64_t offset = 0;
    for (std::uint64_t k = 0; offset < src.size; ++k) {
        //! [credit_loop]
        const std::uint32_t slot = static_cast<std::uint32_t>(k % used);
        wait_until(conn, "the credit of slot " + std::to_string(slot),
                   [&] { return conn.slots[slot].credited && conn.slots[slot].written; });
        char *local = chunks->data() + std::size_t{slot} * buffer_size;
        const std::size_t want = std::min<std::uint64_t>(ring.chunk, src.size - offset);
        const std::size_t len = read_at(src.fd.get(), local, want, offset);
        if (len != want)
            break; // the file shrank: the check below says so
        sha.update(local, len);
        //! [credit_loop]
        if (k == 0 && test_fault().corrupt)
            local[0] = static_cast<char>(local[0] ^ 1); // test only: damage the data after hashing it
        //! [chunk_write]
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
        check_post(ibv_post_send(qp.id->qp, &wr, &bad), "ibv_post_send(RDMA WRITE with immediate)");
        conn.slots[slot] = Slot{false, false}; // the receiver owns the slot, and the device our buffer
        //! [chunk_write]
        offset += len;
        progress.update(offset);
        test_sleep(test_fault().pause_ms);
    }
    if (const std::optional<Error> changed = changed_while_sent(src, offset, opt.file))
        conn.link.refuse(*changed);
    const Digest digest = sha.final();
    ControlMessage done = make_message(MessageType::done);
    done.length = offset;
    done.digest = digest;
    conn.turn = Turn::receiver; // the verdict
    send(done);                 // on RC it arrives after every WRITE before it
    progress.finish();
    result("%s  %s", hex(digest).c_str(), opt.file.c_str()); // sha256sum's format

    step(6, "receive the verdict, and compare the digest the receiver computed with ours");
    const ControlMessage verdict = expect_message(conn, MessageType::verdict, "the verdict");
    if (verdict.flags > 1)
        conn.link.refuse(
            Error("the receiver's verdict has flags " + std::to_string(verdict.flags) + "; expected 0 or 1",
                  "the receiver does not follow the protocol"));
    check_verdict(verdict, digest); // never success on the receiver's word alone
    result("Receiver's digest matches ours: %s", hex(verdict.digest).c_str());

    step(7, "SEND our ID %s and receive the key", quote(opt.id).c_str());
    conn.turn = Turn::receiver; // the key, a receipt or a refusal
    send(make_message(MessageType::id, opt.id));
    wait_until(conn, "the key", [&] { return conn.message.has_value(); });
    const bool is_key = conn.message->type == static_cast<std::uint16_t>(MessageType::key);
    const ControlMessage answer = expect_message(conn, is_key ? MessageType::key : MessageType::receipt, "the key");
    result("%s from receiver: %s", is_key ? "Key" : "Receipt", quote(answer.text, max_text).c_str());

    // The file is delivered and verified, and the answer is in: a disconnect that fails changes neither.
    after_result("the receiver verified the file, and its answer came", [&] {
        step(8, "disconnect (RDMA CM)");
        check_rc(rdma_disconnect(cm.id.get()), "rdma_disconnect");
        wait_disconnected(conn.link.events, "the disconnect");
        check_nothing_after_answer(conn); // the answer was the receiver's last message
    });
} // the QP (rdma_destroy_qp), chunk_mr, the buffers, cq, the cm_id and its channel, msg_mr, pd go here, in that order

} // namespace

int main(int argc, char **argv)
{
    SenderOptions opt;
    return run_sample(sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
