/**
 * @file rogue_loop_client.cpp
 * @brief A client of rdma_event_loop_server that breaks the RDMA CM handshake's order, so that
 * tests/bats/rdma_event_loop.bats can check that the server tells it the connection is over in time.
 *
 *     rogue_loop_client --mode send-before-rtu -sa ADDR -lp PORT -s TEXT [-t S]
 *     rogue_loop_client --mode no-rtu          -sa ADDR -lp PORT [-t S]
 *     rogue_loop_client --mode mute            -sa ADDR -lp PORT [-t S]
 *
 * It connects with its own QP (ibv_create_qp(), not rdma_create_qp()), so librdmacm hands it the
 * server's REP as RDMA_CM_EVENT_CONNECT_RESPONSE and leaves the rest of the handshake to it: its QP to
 * RTR and RTS, then rdma_establish(), which sends the RTU that gives the server ESTABLISHED
 * (librdmacm's cma.c: rdma_establish() -> ucma_process_conn_resp()).
 *  - send-before-rtu: at RTS, SEND TEXT before the RTU (longer than the server's --message-size, it
 *    fails the server's receive, and the server closes a connection it has not seen established),
 *    wait for the SEND's completion, pause 200 ms, then send the RTU;
 *  - no-rtu: never send the RTU;
 *  - mute: the RTU at once, then nothing: no message, and no DREP to the server's DREQ.
 * Then it waits, bounded by -t, for the CM event that ends the connection and prints
 * `told: EVENT after S s` (S counted from the RTU, or from the REP when there is none); it answers a
 * DISCONNECTED with its own rdma_disconnect() (the DREP; mute: only when its -t has run out) and exits 0.
 * Nothing within -t: exit 1.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

using namespace rdma_samples;

namespace {

enum class Mode { send_before_rtu, no_rtu, mute };

struct RogueOptions {
    std::optional<Mode> mode;
};

using Clock = std::chrono::steady_clock;

/** Wait, bounded by @p deadline, for our SEND's completion; print its status. */
void wait_send(ibv_cq *cq, const Deadline &deadline)
{
    ibv_wc wc{};
    while (check_poll(ibv_poll_cq(cq, 1, &wc)) == 0) {
        if (deadline.expired())
            throw timeout_error(deadline.timeout_s(), "our SEND's completion", "is the server running?");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    info("our SEND: %s (%s)", wc_status_name(wc.status), ibv_wc_status_str(wc.status));
}

/** Wait, bounded by @p deadline, for the CM event that ends the connection; print it and how long it took.
 *  @return the event */
rdma_cm_event_type wait_told(CmConnection &cm, const Deadline &deadline, Clock::time_point since)
{
    for (;;) {
        if (!cm_event_ready(cm.channel.get(), deadline.left_ms()))
            throw timeout_error(deadline.timeout_s(), "the server to end the connection",
                                "the server closed it and never told us");
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(cm.channel.get(), &raw), "rdma_get_cm_event");
        const rdma_cm_event_type type = raw->event;
        rdma_ack_cm_event(raw);
        if (type == RDMA_CM_EVENT_TIMEWAIT_EXIT)
            continue;
        const double took = std::chrono::duration<double>(Clock::now() - since).count();
        result("told: %s after %.3f s", cm_event_name(type).c_str(), took);
        return type;
    }
}

void run(const Args &args, const RogueOptions &opt)
{
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    Buffer buf(4096);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    const QpCaps caps{.max_send_wr = 1, .max_recv_wr = 1};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(caps), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get(), caps); // ours: no rdma_create_qp(), so the CM leaves it to us
    qp_to_init(qp.get(), dev, 0);

    // Address, route, REQ; the REP comes as CONNECT_RESPONSE: nobody has sent the RTU yet.
    CmConnection cm = cm_retry(args.cm_server(), args.timeout_s, qp.get(), [&](CmTry &this_try) {
        if (!this_try.resolve(dev))
            return false;
        rdma_conn_param param = cm_conn_param(qp.get()); // qp_num: our own QP's number
        if (this_try.refused_at_once(rdma_connect(this_try.conn.id.get(), &param)))
            return false;
        return this_try.event(RDMA_CM_EVENT_CONNECT_RESPONSE, "the server to accept") != nullptr;
    });
    Clock::time_point since = Clock::now();
    info("the server's REP came (CONNECT_RESPONSE); our RTU is not sent");
    const Deadline deadline(args.timeout_s);
    if (opt.mode == Mode::mute) {
        cm_ready_qp(cm.id.get(), qp.get());
        check_rc(rdma_establish(cm.id.get()), "rdma_establish");
        since = Clock::now();
        info("RTU sent (rdma_establish); now silent");
    } else if (opt.mode == Mode::send_before_rtu) {
        cm_ready_qp(cm.id.get(), qp.get()); // RTR and RTS, as rdma_establish()'s caller must
        const std::uint32_t len = static_cast<std::uint32_t>(args.message.size());
        std::memcpy(buf.data(), args.message.data(), len);
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), len, mr->lkey};
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr *bad = nullptr;
        check_post(ibv_post_send(qp.get(), &wr, &bad), "ibv_post_send");
        info("SENT %u bytes before our RTU", len);
        wait_send(cq.get(), deadline); // the server's QP has taken it (and failed its receive)
        // A pause, so that the server has handled its failed receive (and closed) before the RTU arrives.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        check_rc(rdma_establish(cm.id.get()), "rdma_establish"); // the RTU: the server's ESTABLISHED
        since = Clock::now();
        info("RTU sent (rdma_establish)");
    }
    if (wait_told(cm, deadline, since) == RDMA_CM_EVENT_DISCONNECTED) {
        if (opt.mode == Mode::mute) {
            info("holding back our DREP for the rest of -t");
            std::this_thread::sleep_for(std::chrono::milliseconds(deadline.left_ms()));
        }
        check_rc(rdma_disconnect(cm.id.get()), "rdma_disconnect"); // the DREP to the server's DREQ
    }
    qp_to_error(qp.get());
}

} // namespace

int main(int argc, char **argv)
{
    RogueOptions opt;
    ProgramSpec spec =
        cm_only_spec("rogue_loop_client", "client", "A client of rdma_event_loop_server that breaks the CM's order.");
    spec.message_flag = 's';
    spec.message_help = "what send-before-rtu SENDs";
    spec.extra = {
        {"mode", "send-before-rtu|no-rtu|mute", "what to do wrong", "none: required",
         [&opt](const std::string &v) {
             if (v == "send-before-rtu")
                 opt.mode = Mode::send_before_rtu;
             else if (v == "no-rtu")
                 opt.mode = Mode::no_rtu;
             else if (v == "mute")
                 opt.mode = Mode::mute;
             else
                 throw UsageError("--mode: send-before-rtu, no-rtu or mute, got " + quote(v));
         }},
    };
    return run_sample(spec, argc, argv, [&](const Args &args) {
        if (!opt.mode)
            throw UsageError("--mode is required: send-before-rtu, no-rtu or mute");
        run(args, opt);
    });
}
