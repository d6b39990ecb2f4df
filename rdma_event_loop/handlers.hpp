/**
 * @file handlers.hpp
 * @brief rdma_event_loop's server: what it does when each of its file descriptors wakes epoll (the
 * RDMA CM channel, the completion channel, the device's async fd, the timerfd). server.cpp has the loop.
 */
#pragma once

#include "echo.hpp"
#include "support/fds.hpp"
#include "welcome.hpp"

#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <cerrno>

namespace rdma_event_loop {

using namespace rdma_samples;

/** A client's CONNECT_REQUEST: a free entry, a QP with its receives posted, then rdma_accept(). */
inline void accept_client(Server &server, const Device &dev, rdma_cm_id *id, bool stopping)
{
    const std::string from = addr_to_string(rdma_get_peer_addr(id));
    const auto free_entry =
        std::find_if(server.table.begin(), server.table.end(), [](const Connection &conn) { return !conn.id; });
    std::string refusal = stopping ? "the server is shutting down" : "";
    if (refusal.empty() && free_entry == server.table.end())
        refusal = "server full: " + std::to_string(server.open) + " client(s) connected (--max-clients " +
                  std::to_string(server.opt.max_clients) + ")";
    //! [reject]
    if (!refusal.empty()) { // the reason travels in the REJ's private data; the client prints it
        info("refused a client from %s: %s", from.c_str(), refusal.c_str());
        refuse_request(id, refusal); // rdma_reject(), then rdma_destroy_id(): its event is acknowledged already
        return;
    }
    //! [reject]
    Connection &conn = *free_entry;
    conn = Connection{};
    conn.id.reset(id);
    conn.generation = ++server.generations; // its completions are told from an earlier client's of this entry
    conn.number = server.arrived++;
    conn.addr = from;
    conn.deadline = Clock::now() + std::chrono::seconds(server.args.timeout_s);
    conn.rtu_by = conn.deadline; // its RTU, or a first message, within -t
    ++server.open;
    server.most_open = std::max(server.most_open, server.open);
    const std::size_t entry = static_cast<std::size_t>(free_entry - server.table.begin());
    try {
        check_cm_device(id, dev);
        const std::uint32_t depth = static_cast<std::uint32_t>(server.opt.credits);
        conn.qp = create_rc_qp(server.pd, server.cq, {.max_send_wr = depth, .max_recv_wr = depth});
        qp_to_init(conn.qp.get(), dev, 0); // SEND/RECEIVE only: nothing remote granted
        for (int slot = 0; slot < server.opt.credits; ++slot)
            post_receive(server, entry, slot); // its credits: posted before it can send
        cm_ready_qp(id, conn.qp.get());
        //! [accept]
        Welcome welcome;
        welcome.credits = static_cast<std::uint8_t>(server.opt.credits);
        rdma_conn_param param = cm_conn_param(conn.qp.get());
        param.private_data = &welcome; // in our REP: how many messages it may have outstanding
        param.private_data_len = sizeof welcome;
        check_rc(rdma_accept(id, &param), "rdma_accept");
        //! [accept]
    } catch (const Error &e) { // this client's failure, not the server's
        conn.phase = Phase::closing;
        conn.cm_done = true;
        conn.ending = Ending::dropped;
        conn.outcome = std::string("dropped while being accepted: ") + e.what();
        conn.deadline = Clock::now() + close_wait(server);
        if (conn.qp)
            qp_to_error(conn.qp.get());
        else
            conn.deadline = Clock::now();
    }
}

/** Take every CM event queued (the channel is non-blocking) and act on it. */
inline void on_cm_events(Server &server, const Device &dev, rdma_event_channel *channel, bool stopping)
{
    rdma_cm_event *raw = nullptr;
    while (rdma_get_cm_event(channel, &raw) == 0) {
        //! [cm_event]
        const rdma_cm_event_type type = raw->event;
        rdma_cm_id *id = raw->id;
        rdma_ack_cm_event(raw); // at once: rdma_destroy_id() waits until its events are acknowledged
        auto *conn = static_cast<Connection *>(nullptr);
        for (Connection &each : server.table)
            if (each.id.get() == id && id != nullptr)
                conn = &each;
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            accept_client(server, dev, id, stopping);
        } else if (conn == nullptr) {
            continue; // an event of a client already released, or of the listener
        } else if (type == RDMA_CM_EVENT_ESTABLISHED && conn->phase != Phase::closing) {
            conn->established = true;
            if (conn->phase == Phase::accepted)
                conn->phase = Phase::open;
            result("connection %d established from %s", conn->number, conn->addr.c_str());
        } else if (type == RDMA_CM_EVENT_ESTABLISHED) { // closed before its RTU came: the DREQ can go now
            conn->established = true;
            result("connection %d established from %s after we closed it: disconnecting now", conn->number,
                   conn->addr.c_str());
            conn->deadline = Clock::now() + close_wait(server);
            if (rdma_disconnect(id) != 0)
                conn->cm_done = true;
        } else if (type == RDMA_CM_EVENT_DISCONNECTED) { // its DREQ, or the answer to ours
            conn->cm_done = conn->peer_left = true;
            // (else the last echo completes first; a flushed QP has no echo left to send)
            if (conn->phase == Phase::flushed || (conn->sends_busy == 0 && conn->waiting.empty()))
                begin_close(server, *conn, Ending::finished, "the client disconnected");
        } else if (type != RDMA_CM_EVENT_TIMEWAIT_EXIT) { // REJECTED, CONNECT_ERROR, UNREACHABLE...
            conn->cm_done = true;
            begin_close(server, *conn, Ending::dropped, "dropped: " + cm_event_name(type));
        }
        //! [cm_event]
        if (conn != nullptr)
            release_if_done(server, *conn);
    }
    if (errno != EAGAIN)
        fail_errno("rdma_get_cm_event", errno);
}

/** Poll the CQ until it is empty, handing each completion to its connection. */
inline void poll_until_empty(Server &server)
{
    ibv_wc wc[16];
    for (int n; (n = check_poll(ibv_poll_cq(server.cq, 16, wc))) > 0;)
        for (int i = 0; i < n; ++i)
            on_completion(server, wc[i]);
}

/** The completion channel woke epoll: take its events, acknowledge them, poll, re-arm, poll again. */
inline void on_cq_events(Server &server, ibv_comp_channel *channel)
{
    //! [cq_event]
    // The channel's fd is non-blocking: ibv_get_cq_event() returns -1 (EAGAIN) once it has none left,
    // instead of sleeping (ibv_get_cq_event(3)). One CQ, so every event names the same CQ.
    unsigned events = 0;
    ibv_cq *ev_cq = nullptr;
    void *ev_ctx = nullptr;
    while (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0)
        ++events;
    if (events > 0)
        ibv_ack_cq_events(ev_cq, events); // one call for all: it takes a lock; destroy waits for them
    poll_until_empty(server);
    // Re-arm: the NEXT completion raises an event. One that landed between the last poll and the arm
    // raises none, so poll again after arming; what that finds is handled now, and epoll sleeps only
    // when the CQ was empty while armed.
    check_rc(ibv_req_notify_cq(server.cq, 0), "ibv_req_notify_cq");
    poll_until_empty(server);
    //! [cq_event]
}

/** The device's async fd: a QP that broke (its connection closes), or worse (the server stops). */
inline void on_async_events(Server &server, ibv_context *ctx)
{
    ibv_async_event ev{};
    while (ibv_get_async_event(ctx, &ev) == 0) { // non-blocking: -1 (EAGAIN) when none is left
        const ibv_event_type type = ev.event_type;
        ibv_qp *qp = type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR
                         ? ev.element.qp
                         : nullptr;
        ibv_ack_async_event(&ev);
        info("async event %s", ibv_event_type_str(type));
        for (Connection &conn : server.table)
            if (qp != nullptr && conn.qp.get() == qp)
                begin_close(server, conn, Ending::dropped,
                            std::string("dropped: its QP broke (") + ibv_event_type_str(type) + ")");
        if (type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_DEVICE_FATAL)
            throw Error(std::string("the device reported ") + ibv_event_type_str(type),
                        "a CQ overrun means it was sized too small; see the async event's man page");
    }
}

/** The timerfd fired: close every connection past its deadline; release every drain past its own. */
inline void on_deadlines(Server &server)
{
    const Clock::time_point now = Clock::now();
    for (Connection &conn : server.table) {
        if (!conn.id || now < conn.deadline)
            continue;
        if (conn.phase == Phase::flushed)
            begin_close(server, conn, Ending::dropped,
                        "dropped: its QP flushed its work, and no RDMA CM event said why within " +
                            std::to_string(server.args.timeout_s) + " s (-t)");
        else if (conn.phase != Phase::closing)
            begin_close(server, conn, Ending::dropped,
                        "dropped: no message for " + std::to_string(server.args.timeout_s) + " s (-t)");
        else
            release_if_done(server, conn); // its flushes or its CM answer never came within -t
    }
}

} // namespace rdma_event_loop
