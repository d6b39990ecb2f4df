/**
 * @file client.cpp
 * @brief rdma_event_loop's client: connect with RDMA CM, SEND --count messages, check each echo byte
 * for byte. It may have as many messages out as the server's welcome grants (its credits).
 *
 * The server's REP carries a welcome in its private data (welcome.hpp): checked, like everything a
 * peer sends. A server that refuses us (--max-clients) says why in its REJ's private data, and the
 * connect's error prints it. Every wait is bounded by -t and sleeps in poll() on the completion
 * channel and the CM channel (common/cq_channel.hpp's arm and sleep, which chapter 9 writes out), so a
 * server that drops us is noticed at once.
 */
#include "support/options.hpp"
#include "talk.hpp"
#include "welcome.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cq_channel.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

using namespace rdma_samples;
using namespace rdma_event_loop;

namespace {

ClientOptions opt;
/** One completion: an echo (check it against what we sent, post its receive again) or a SEND done. */
void take(Talk &talk, const ibv_wc &wc)
{
    const bool echo = static_cast<int>(wc.wr_id) < max_credits;
    check_wc(wc, echo ? IBV_WC_RECV : IBV_WC_SEND, echo ? "the receive of an echo" : "a SEND");
    if (!echo) {
        --talk.sends_busy;
        return;
    }
    --talk.recvs_posted;
    const std::string &want = talk.sent.at(static_cast<std::size_t>(talk.echoes)); // RC: echoes come in order
    const char *got = talk.buf.data() + wc.wr_id * slot_size;
    if (wc.byte_len != want.size() || std::memcmp(got, want.data(), want.size()) != 0)
        throw Error("echo " + std::to_string(talk.echoes + 1) + " differs from what we sent: got " +
                        quote(std::string(got, std::min<std::size_t>(wc.byte_len, slot_size))) + ", sent " +
                        quote(want),
                    "the server must send back exactly the bytes it received");
    ++talk.echoes;
    result("echo %d: \"%s\" (%zu bytes), byte for byte as sent", talk.echoes, want.c_str(), want.size());
    if (talk.echoes + talk.recvs_posted < opt.count)
        post_receive(talk, static_cast<int>(wc.wr_id)); // a receive for a later echo
}

/** Sleep (bounded by @p wait_ms) until a completion or a CM event; take what came. A CM event here
 *  can only be the server closing the connection. @return false when nothing came in time */
bool sleep_once(Talk &talk, int wait_ms, const std::string &what)
{
    ibv_wc wc{};
    if (arm_cq_and_poll(talk.cq, {&wc, 1}) == 1) { // arm, then look once more (common/cq_channel.hpp)
        take(talk, wc);
        return true;
    }
    pollfd fds[1] = {{talk.cm->fd, POLLIN, 0}}; // beside the completion channel: the server closing
    const int ready = sleep_on_cq_channel(talk.channel, fds, wait_ms);
    while (check_poll(ibv_poll_cq(talk.cq, 1, &wc)) == 1)
        take(talk, wc);
    rdma_cm_event *raw = nullptr;
    if (ready > 0 && (fds[0].revents & POLLIN) && rdma_get_cm_event(talk.cm, &raw) == 0) {
        const CmEventPtr ev(raw); // connected, the only event left to come is the end: DISCONNECTED
        throw Error("the server closed the connection (" + cm_event_name(ev->event) + ") while we waited for " + what,
                    "the server drops a client that sends nothing for its -t, or that it cannot serve; its output "
                    "says why");
    }
    return ready > 0;
}

/** Wait, bounded by -t, until @p done holds. */
template <typename Pred>
void wait_until(Talk &talk, Pred done, const std::string &what)
{
    const Deadline deadline(talk.timeout_s);
    while (!done())
        if (!sleep_once(talk, deadline.left_ms(), what) && deadline.expired())
            throw timeout_error(talk.timeout_s, what, "is the server still running? its output says why");
}

void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));

    step(2, "register %d receive and %d send slots of %zu bytes, local write only", max_credits, max_credits,
         slot_size);
    Buffer buf(2 * max_credits * slot_size);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion channel, a CQ and an RC queue pair");
    CompChannelPtr channel(check(ibv_create_comp_channel(dev.ctx.get()), "ibv_create_comp_channel"));
    const QpCaps caps{.max_send_wr = max_credits, .max_recv_wr = max_credits};
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(caps), nullptr, channel.get(), 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get(), caps);
    qp_to_init(qp.get(), dev, 0);

    step(4, "connect to the server with RDMA CM (%s port %u) and read its welcome", args.server_addr->c_str(),
         args.listen_port);
    //! [connect]
    CmConnection cm = cm_connect(args.cm_server(), args.timeout_s, dev, qp.get()); // rdma_write's step 4, in a retry
    const Welcome welcome = read_welcome(cm.accept_private_data, cm.peer); // the peer's bytes: checked before use
    //! [connect]
    Talk talk{.qp = qp.get(),
              .cq = cq.get(),
              .channel = channel.get(),
              .cm = cm.channel.get(),
              .buf = buf,
              .mr = mr.get(),
              .timeout_s = args.timeout_s};
    talk.window = std::min<int>(welcome.credits, opt.count);
    info("connected; the server grants %u credits: up to %d message(s) out at once", welcome.credits, talk.window);

    step(5, "post %d receive(s), then SEND %d message(s), never more out than the credits", talk.window, opt.count);
    for (int slot = 0; slot < talk.window; ++slot)
        post_receive(talk, slot); // before the first SEND: an echo never finds no receive
    //! [credits]
    for (int i = 0; i < opt.count; ++i) {
        // Out: sent and not echoed yet. At the window, wait for an echo: it gives its credit back.
        wait_until(
            talk, [&] { return i - talk.echoes < talk.window && talk.sends_busy < talk.window; },
            "an echo (a credit back)");
        for (const Deadline pause = Deadline::in_ms(opt.interval_ms); !pause.expired();)
            sleep_once(talk, pause.left_ms(), "nothing (a pause before message " + std::to_string(i + 1) + ")");
        talk.sent.push_back(args.message + " #" + std::to_string(i + 1));
        const int slot = max_credits + (i % talk.window); // the oldest send slot: sends complete in order
        std::memcpy(buf.data() + static_cast<std::size_t>(slot) * slot_size, talk.sent.back().data(),
                    talk.sent.back().size());
        post_send(talk, slot, static_cast<std::uint32_t>(talk.sent.back().size()));
    }
    //! [credits]
    wait_until(
        talk, [&] { return talk.echoes == opt.count && talk.sends_busy == 0; }, "the last echo");
    result("All %d echoes match what was sent", opt.count);

    step(6, "disconnect (RDMA CM)");
    cm_disconnect(cm, args.timeout_s);
}

} // namespace

int main(int argc, char **argv)
{
    ProgramSpec spec = client_spec(opt);
    refuse_descriptor_files(spec);
    return run_sample(spec, argc, argv, run);
}
