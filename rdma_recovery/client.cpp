/**
 * @file client.cpp
 * @brief Recovery with RDMA CM, client side: a session of --count messages that survives a server
 * killed and restarted.
 *
 * Each message is an RDMA WRITE with immediate into the server's slot i (the immediate names i). Its
 * successful completion is the server's acknowledgement: the bytes are in the server's memory. When the
 * connection breaks (the server's DREQ gives DISCONNECTED, or a WRITE fails: IBV_WC_RETRY_EXC_ERR when
 * the server's QP is gone), the client does not reset its QP as requester.cpp does: a cm_id is not
 * reusable after a disconnect, so it destroys the cm_id, the QP and the CQ, makes new ones and
 * connects again, with a bounded exponential backoff while nobody listens (-t bounds the whole
 * reconnect). The restarted server registered its memory again: the client learns the new rkey from
 * the server's first SEND, and resumes with the first message not acknowledged.
 */
#include "recovery.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>

#include <arpa/inet.h>

#include <cstring>
#include <optional>
#include <string>

using namespace rdma_samples;

namespace rdma_recovery {
namespace {

/** How a connection of the session ended before the last message was acknowledged. */
enum class Ending {
    server_event, ///< the CM channel spoke while we paused: the server's DREQ (DISCONNECTED), or its kernel's
    write_failed, ///< a WRITE's completion was no success (RETRY_EXC_ERR: nobody answers for the server's QP)
};

/** A connection's end: how, and the name of the event or status that says so. */
struct Ended {
    Ending how;
    std::string name;
};

void run(const Args &args, const ClientOptions &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // each message is a WRITE with immediate: none on siw
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register %d source slots of %zu bytes (no access flags: the device only reads them)", opt.count,
         slot_size);
    Buffer buf = source_slots(opt.count); // slot i holds "write #i"
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), 0), "ibv_reg_mr"));

    int next = 1; // the first message not acknowledged: where a new connection resumes
    std::uint32_t last_rkey = 0;
    for (int connection = 1;; ++connection) {
        step(3, "connection %d: a new CQ and QP, a new cm_id; connect (backoff while nobody listens, -t in all)",
             connection);
        //! [connect]
        CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
        QpPtr qp = create_rc_qp(pd.get(), cq.get());
        qp_to_init(qp.get(), dev, 0);
        Completions completions(cq.get());
        DescriptorReceive slots(pd.get(), qp.get()); // the server SENDs its slots' descriptor at once
        // Nobody there yet: cm_retry() waits a little longer after each refused try, 100 ms doubled up to
        // 1.6 s, never past -t, and tries again with a new cm_id.
        const CmBackoff backoff{.first_ms = 100, .max_ms = 1600};
        auto attempt = [&](CmTry &this_try) {
            rdma_cm_id *id = this_try.conn.id.get();
            if (!this_try.resolve(dev)) // address and route (rdma_write's step 4 writes them out)
                return false;
            rdma_conn_param param = cm_conn_param(qp.get());
            check_rc(rdma_connect(id, &param), "rdma_connect");
            if (!this_try.event(RDMA_CM_EVENT_CONNECT_RESPONSE, "the server to accept"))
                return false;
            cm_ready_qp(id, qp.get());
            check_rc(rdma_establish(id), "rdma_establish");
            return true;
        };
        CmConnection cm = cm_retry(args.cm_server(), args.timeout_s, qp.get(), attempt, RDMA_PS_TCP, backoff);
        //! [connect]
        //! [rkey]
        const ResourceDescriptor remote =
            parse_resource_descriptor(slots.wait(completions, args.timeout_s), "the server's SEND", ResourceKind::mmap);
        if (remote.length < static_cast<std::uint32_t>(opt.count) * slot_size ||
            !(remote.access & IBV_ACCESS_REMOTE_WRITE))
            throw Error("the server exports " + std::to_string(remote.length) + " bytes, access " +
                            access_to_string(remote.access) + ": not " + std::to_string(opt.count) + " writable slots",
                        "is the server at -sa an rdma_recovery_server?");
        info("connected; the server's slots: addr 0x%llx, rkey 0x%x%s", static_cast<unsigned long long>(remote.addr),
             remote.rkey,
             last_rkey && remote.rkey != last_rkey ? " (new: the server registered its memory again)" : "");
        last_rkey = remote.rkey;
        //! [rkey]

        step(4, "WRITE with immediate, messages #%d to #%d, one at a time: each completion is an acknowledgement", next,
             opt.count);
        std::optional<Ended> ended; // how the connection ended, while messages were left
        //! [session]
        for (; next <= opt.count; ++next) {
            // A pause (a slow client), watching the CM channel: a server that goes away says DISCONNECTED.
            if (cm_event_ready(cm.channel.get(), opt.interval_ms)) {
                rdma_cm_event *raw = nullptr;
                check_rc(rdma_get_cm_event(cm.channel.get(), &raw), "rdma_get_cm_event");
                const CmEventPtr ev(raw);
                ended = Ended{.how = Ending::server_event, .name = cm_event_name(ev->event)};
                break;
            }
            ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(buf.data() + (next - 1) * slot_size),
                        .length = static_cast<std::uint32_t>(slot_text(next).size()),
                        .lkey = mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = static_cast<std::uint64_t>(next);
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; // the bytes into slot #next, and a receive consumed there
            wr.imm_data = htonl(static_cast<std::uint32_t>(next));
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma.remote_addr = remote.addr + static_cast<std::uint64_t>(next - 1) * slot_size;
            wr.wr.rdma.rkey = remote.rkey;
            ibv_send_wr *bad_wr = nullptr;
            check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(RDMA_WRITE_WITH_IMM)");
            const ibv_wc wc =
                completions.poll_for(wr.wr_id, args.timeout_s, "the completion of message #" + std::to_string(next));
            if (wc.status != IBV_WC_SUCCESS) {
                ended = Ended{.how = Ending::write_failed, .name = wc_status_name(wc.status)};
                break; // not acknowledged: the next connection sends it again
            }
            result("message #%d acknowledged", next);
        }
        //! [session]
        if (!ended) {
            step(5, "every message acknowledged; disconnect");
            cm_disconnect(cm, args.timeout_s);
            result("All %d message(s) acknowledged, over %d connection(s)", opt.count, connection);
            return;
        }
        result("connection %d broke at message #%d: %s", connection, next, ended->name.c_str());
        if (connection > max_reconnects)
            throw Error("the connection broke " + std::to_string(connection) + " times",
                        "the server keeps failing: its output says why");
        //! [teardown]
        // The old connection is finished: its QP to ERR (what is still posted is flushed), its cm_id
        // destroyed (a cm_id that saw DISCONNECTED cannot connect again); QP and CQ go at the end of
        // this iteration, in reverse order of creation.
        qp_to_error(qp.get());
        cm.id.reset();
        //! [teardown]
    }
}

} // namespace
} // namespace rdma_recovery

int main(int argc, char **argv)
{
    rdma_recovery::ClientOptions opt;
    return run_sample(rdma_recovery::client_spec(opt), argc, argv,
                      [&](const Args &args) { rdma_recovery::run(args, opt); });
}
