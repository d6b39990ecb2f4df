/**
 * @file multi_receive.hpp
 * @brief What the two receivers of many connections share (rdma_multi_conn_receive, rdma_srq_receive):
 * which connection a completion belongs to, the descriptor-file connect of N QPs, and what the RDMA CM
 * server does with each CM event and each completion.
 *
 * Each receiver writes its own loop over these: rdma_multi_conn's sleeps on the completion channel and
 * the CM's channel (chapter 9), rdma_srq's also on the device's async fd, for the SRQ limit event.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/cm_server.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/verbs.hpp>
#include <rdma_samples/wait.hpp>

#include <string>
#include <utility>
#include <vector>

namespace rdma_samples {

/**
 * @brief Which connection a completion belongs to: the index of the QP whose number it carries.
 * @param qps the receiver's QPs, connection i on qps[i]
 * @param wc  the completion
 * @return the connection, or -1 when no QP has that number
 */
int connection_of(const std::vector<QpPtr> &qps, const ibv_wc &wc);

/**
 * @brief Descriptor files: for each connection, read the sender's descriptor (numbered_path()), move its
 * QP to RTR and RTS, and answer with ours, naming the sender's nonce.
 * @param args the flags (-re, -ld, -t)
 * @param dev  the device
 * @param qps  one QP per connection, in INIT, their receives posted
 */
void connect_by_files(const Args &args, const Device &dev, const std::vector<QpPtr> &qps);

/**
 * @brief Mark what completions taken mean for each CM client: its message came, or its receive failed
 * (a completion that overtook the ESTABLISHED event counts as "up" too).
 * @param qps     the receiver's QPs, client i on qps[i]
 * @param taken   the completions taken
 * @param clients the server's clients
 */
void report_completions(const std::vector<QpPtr> &qps, const std::vector<ibv_wc> &taken, CmClients &clients);

/**
 * @brief The CM server's switch for one event: accept a sender's CONNECT_REQUEST on the next free QP
 * (or refuse one too many), mark ESTABLISHED, and mark a sender that went away lost and answer it.
 * Before a DISCONNECTED (or a failure event), take the CQ's completions: the sender's message may be
 * there already, and then it is not lost.
 * @param ev      the event; acknowledged here (it goes before its cm_id may be destroyed)
 * @param clients the server's clients
 * @param dev     the device every client must arrive on
 * @param qps     the receiver's QPs, client i on qps[i], each in INIT with its receives posted
 */
void serve_cm_event(CmEventPtr ev, CmClients &clients, const Device &dev, const std::vector<QpPtr> &qps);

/** @brief A receiver's count of the messages it waits for (descriptor files), bounded by -t. */
class MessageCount {
public:
    /**
     * @param cq        the CQ all QPs share @param qps the receiver's QPs, connection i on qps[i]
     * @param n         how many messages to wait for
     * @param timeout_s the bound (-t) @param what what is waited for, for the timeout message
     * @param ctx       the device, whose async events a timeout names
     */
    MessageCount(ibv_cq *cq, const std::vector<QpPtr> &qps, int n, int timeout_s, std::string what, ibv_context *ctx);
    /** @brief Whether messages are still missing. @return true until n have been counted */
    bool missing() const { return got_ < n_; }
    /** @brief Whether -t has passed. @return true once it has */
    bool expired() const { return deadline_.expired(); }
    /** @brief What is left of -t. @return milliseconds */
    int left_ms() const { return deadline_.left_ms(); }
    /**
     * @brief Count the completions taken, each checked to be a successful RECV (the error names the
     * connection); throws the timeout error (with the device's async events) when none came and -t passed.
     * @param taken the completions taken since the last call
     */
    void count(const std::vector<ibv_wc> &taken);

private:
    Completions completions_;
    const std::vector<QpPtr> &qps_;
    int n_;
    int got_ = 0;
    int timeout_s_;
    Deadline deadline_;
    std::string what_;
    ibv_context *ctx_;
};

/** @brief The receivers' RDMA CM server: its listener, its senders' bookkeeping, the -t clock between events. */
class SenderServer {
public:
    /**
     * @brief Listen on -lp for one sender per QP.
     * @param args the flags (-lp, -t) @param dev the device @param qps one QP per sender, in INIT, receives posted
     */
    SenderServer(const Args &args, const Device &dev, const std::vector<QpPtr> &qps);
    /** @brief Whether to go on. @return false once every sender is finished, or -t passed without an event */
    bool serving() const { return !clients_.all_finished() && !idle_.expired(); }
    /** @brief The CM's event channel, to sleep on. @return its fd */
    int fd() const { return listener_.channel->fd; }
    /** @brief What is left of -t. @return milliseconds */
    int left_ms() const { return idle_.left_ms(); }
    /** @brief report_completions() for these senders. @param taken the completions taken */
    void report(const std::vector<ibv_wc> &taken) { report_completions(qps_, taken, clients_); }
    /** @brief Take the CM event the channel has (rdma_get_cm_event()): progress, so -t starts again.
     *  @return it, acknowledged when it goes */
    CmEventPtr next_event();
    /** @brief Whether @p ev says a sender went away: its message may be in the CQ already, take that first.
     *  @param ev the event @return true for all but CONNECT_REQUEST and ESTABLISHED */
    static bool ends_connection(const rdma_cm_event &ev);
    /** @brief serve_cm_event() for these senders. @param ev the event */
    void serve(CmEventPtr ev) { serve_cm_event(std::move(ev), clients_, dev_, qps_); }
    /** @brief The end: CmClients::finish(), with the receivers' words. */
    void finish();

private:
    const Args &args_;
    const Device &dev_;
    const std::vector<QpPtr> &qps_;
    CmConnection listener_;
    CmClients clients_;
    Deadline idle_; // -t bounds the wait for each next event, not the whole service
};

} // namespace rdma_samples
