/**
 * @file server.cpp
 * @brief Recovery with RDMA CM, server side: serve one client after another, each until it
 * disconnects, dies or falls silent; a client that dies mid-message costs only its own connection.
 *
 * Each client gets a CQ and a QP of its own, a zero-length receive per slot (an RDMA WRITE with
 * immediate consumes one, and its immediate names the slot), and the slots' descriptor in a SEND right
 * after the accept. The memory is registered once per run: a restarted server hands out a new rkey,
 * which its clients learn from that SEND (client.cpp).
 */
#include "recovery.hpp"
#include "turns.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/wait.hpp>

#include <arpa/inet.h>

#include <cstring>
#include <optional>
#include <string>

using namespace rdma_samples;

namespace rdma_recovery {
namespace {

void post_slot_receive(ibv_qp *qp, std::uint64_t wr_id)
{
    ibv_recv_wr wr{}; // no scatter/gather list: a WRITE with immediate puts its bytes where its rkey says
    wr.wr_id = wr_id;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_recv(qp, &wr, &bad_wr), "ibv_post_recv");
}

void run(const Args &args, const ServerOptions &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    require_immediate_data(dev); // each message is a WRITE with immediate: none on siw
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register %d slots of %zu bytes, local write + remote write", max_slots, slot_size);
    Buffer buf(max_slots * slot_size);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), access), "ibv_reg_mr"));
    ResourceDescriptor exported = describe_export(mr.get(), access);
    info("rkey 0x%x: a new one every time the server starts", mr->rkey);

    step(3, "listen on port %u", args.listen_port);
    CmConnection listener = cm_listen(dev, args.listen_port, 4);
    info("listening on port %u; serving %d client(s), one at a time", args.listen_port, opt.clients);

    CmEventPtr waiting; // a client that asked while we served another: it is served next
    for (int client = 1; client <= opt.clients; ++client) {
        step(4, "client %d: its own CQ and QP, a receive per slot, accept, SEND the slots' descriptor", client);
        //! [accept]
        const bool waited = static_cast<bool>(waiting);
        CmEventPtr req = waiting
                             ? std::move(waiting)
                             : expect_cm_event(listener.channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, args.timeout_s,
                                               "a client to connect", "port " + std::to_string(args.listen_port));
        CmIdPtr id(req->id); // a connection request comes with a new cm_id: ours to destroy
        const std::string peer = addr_to_string(rdma_get_peer_addr(id.get()));
        check_cm_device(id.get(), dev);
        CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
        QpPtr qp = create_rc_qp(pd.get(), cq.get());
        qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE);
        for (int slot = 1; slot <= max_slots; ++slot)
            post_slot_receive(qp.get(), static_cast<std::uint64_t>(slot));
        try {
            cm_ready_qp(id.get(), qp.get());
            rdma_conn_param param = cm_conn_param(qp.get());
            check_rc(rdma_accept(id.get(), &param), "rdma_accept");
        } catch (const Error &e) {
            if (!waited)
                throw;
            // Its client gave up while it waited (its connect timed out; its CM sent a REJ). The kernel
            // drops the events of a request not yet accepted ("the accept will just fail later", says
            // drivers/infiniband/core/ucma.c): this failure is how the server learns it.
            info("a client that waited its turn is gone: %s", e.what());
            req.reset(); // acknowledged before its cm_id is destroyed
            --client;    // the turn goes to the next one
            continue;
        }
        req.reset();
        std::optional<Ended> ended = wait_established(listener.channel.get(), args.timeout_s, waiting);
        Completions completions(cq.get());
        if (!ended) {
            exported.nonce = new_nonce();
            send_descriptor(pd.get(), qp.get(), completions, format_descriptor(exported), args.timeout_s);
            info("client %d from %s: connected, slots sent (rkey 0x%x)", client, peer.c_str(), exported.rkey);
        }
        //! [accept]

        step(5, "serve client %d: each receive's immediate names the slot a WRITE filled", client);
        //! [serve]
        int messages = 0;
        auto take = [&](const ibv_wc &wc) {
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
                ended = Ended{.how = Ending::bad_completion,
                              .why = std::string("a completion with ") + wc_status_name(wc.status)};
                return;
            }
            const std::uint32_t slot = ntohl(wc.imm_data); // the peer's number: checked before use
            if (slot < 1 || slot > static_cast<std::uint32_t>(max_slots)) {
                ended = Ended{.how = Ending::bad_immediate,
                              .why = "an immediate out of range (" + std::to_string(slot) + ")"};
                return;
            }
            const char *text = buf.data() + (slot - 1) * slot_size;
            result("client %d: got #%u: \"%.*s\"", client, slot, static_cast<int>(strnlen(text, slot_size)), text);
            ++messages;
            post_slot_receive(qp.get(), wc.wr_id); // the receive again, for a later message
        };
        Deadline idle(args.timeout_s);
        ibv_wc wc{};
        while (!ended) {
            if (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 1) {
                take(wc);
                idle.restart();
            } else if (cm_event_ready(listener.channel.get(), 10)) {
                rdma_cm_event *raw = nullptr;
                check_rc(rdma_get_cm_event(listener.channel.get(), &raw), "rdma_get_cm_event");
                CmEventPtr ev(raw);
                const std::string name = cm_event_name(ev->event);
                if (park(ev, waiting) || ev->id != id.get()) // one client at a time: the next one waits
                    continue;
                ended = Ended{.how = Ending::gone, .why = "the client is gone (" + name + ")"};
                while (check_poll(ibv_poll_cq(cq.get(), 1, &wc)) == 1)
                    take(wc); // what arrived before its DREQ
            } else if (idle.expired()) {
                ended =
                    Ended{.how = Ending::silent, .why = "no message for " + std::to_string(args.timeout_s) + " s (-t)"};
            }
        }
        //! [serve]
        //! [close]
        // Whatever ended it: answer or send the DREQ, move the QP to ERR (its receives are flushed),
        // then QP, CQ and cm_id go at the end of this iteration. The listener and the memory stay.
        rdma_disconnect(id.get()); // fails harmlessly when the connection is already gone
        qp_to_error(qp.get());
        result("client %d: %d message(s); %s", client, messages, ended->why.c_str());
        //! [close]
    }
    if (waiting)
        refuse_request(waiting); // it came after the last client we serve
    print_slots("Server", buf.data(), "at the end");
}

} // namespace
} // namespace rdma_recovery

int main(int argc, char **argv)
{
    rdma_recovery::ServerOptions opt;
    return run_sample(rdma_recovery::server_spec(opt), argc, argv,
                      [&](const Args &args) { rdma_recovery::run(args, opt); });
}
