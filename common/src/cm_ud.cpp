/** @file cm_ud.cpp @brief RDMA CM on RDMA_PS_UDP: the SIDR lookup of a server's UD QP (udaddy's way). */
#include "cm_internal.hpp"

#include <rdma_samples/cm_ud.hpp>
#include <rdma_samples/log.hpp>

namespace rdma_samples {

CmUdPeer cm_ud_connect(const CmServerAddr &server, int timeout_s, const Device &dev, const ibv_qp *qp)
{
    // cm_retry(), the one retry loop of every RDMA CM client: while nobody answers, a new try, each with
    // a cm_id on RDMA_PS_UDP. No qp for cm_retry: cm_disconnect() never runs on a lookup.
    CmUdPeer p;
    p.cm = cm_retry(
        server, timeout_s, nullptr,
        [&](CmTry &this_try) {
            rdma_cm_id *id = this_try.conn.id.get();
            if (!this_try.resolve(dev)) // address and route, as for RC
                return false;

            rdma_conn_param param{};
            param.qp_num = qp->qp_num; // our own QP: the server learns it only from our datagrams anyway
            check_rc(rdma_connect(id, &param), "rdma_connect(SIDR request)");
            CmEventPtr ev = next_cm_event(this_try.conn.channel.get(), this_try.deadline);
            if (!ev || ev->event == RDMA_CM_EVENT_UNREACHABLE) { // no answer, or (status > 0) nobody listens
                this_try.refused = ev && ev->status > 0;
                this_try.not_yet =
                    timeout_error(timeout_s, "the UD server at " + this_try.conn.peer + " to answer (SIDR reply)",
                                  "is the receiver running with -cm and the same -lp on " + this_try.conn.peer +
                                      "? raise -t if it is just slow");
                return false;
            }
            if (ev->event != RDMA_CM_EVENT_ESTABLISHED || ev->status != 0)
                throw cm_event_error(*ev, "the server's answer (SIDR reply)", this_try.conn.peer);
            //! [ud_param]
            // The answer: how to address the server's UD QP. ah_attr is the address vector (is_global, the
            // server's GID, our GID index, port): what ibv_create_ah() takes. qp_num and qkey go into every
            // SEND's wr.ud. This is all udaddy's client keeps from the event.
            p.ah_attr = ev->param.ud.ah_attr;
            p.qp_num = ev->param.ud.qp_num;
            p.qkey = ev->param.ud.qkey;
            //! [ud_param]
            return true;
        },
        RDMA_PS_UDP);
    info("RDMA CM: %s answered through %s port %u: QPN 0x%06x, Q_Key 0x%08x", p.cm.peer.c_str(),
         ibv_get_device_name(p.cm.id->verbs->device), p.cm.id->port_num, p.qp_num, p.qkey);
    return p;
}

CmConnection cm_ud_accept(std::uint16_t port, int timeout_s, const Device &dev, const ibv_qp *qp)
{
    CmConnection c = cm_listen(dev, port, 1, RDMA_PS_UDP);
    info("listening on port %u (RDMA_PS_UDP); waiting up to %d s for the sender (the side with -sa)", port, timeout_s);
    CmEventPtr req = expect_cm_event(c.channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, timeout_s,
                                     "a sender's lookup (SIDR request)", c.peer);
    c.id.reset(req->id); // the request's new cm_id: ours to destroy
    c.peer = addr_to_string(rdma_get_peer_addr(req->id));
    check_cm_device(req->id, dev);
    // The SIDR reply carries our QPN and the port space's Q_Key (RDMA_UDP_QKEY); no ESTABLISHED follows.
    rdma_conn_param param{};
    param.qp_num = qp->qp_num;
    check_rc(rdma_accept(req->id, &param), "rdma_accept(SIDR reply)");
    info("RDMA CM: answered %s with QPN 0x%06x", c.peer.c_str(), qp->qp_num);
    return c;
}

int cm_ud_answer_again(CmConnection &c, const ibv_qp *qp)
{
    int answered = 0;
    while (cm_event_ready(c.channel.get(), 0)) {
        rdma_cm_event *raw = nullptr;
        check_rc(rdma_get_cm_event(c.channel.get(), &raw), "rdma_get_cm_event");
        CmEventPtr ev(raw);
        if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            continue;
        rdma_cm_id *id = ev->id;
        ev.reset(); // acknowledged first: rdma_destroy_id() waits until its id's events are acknowledged
        CmIdPtr request(id);
        rdma_conn_param param{};
        param.qp_num = qp->qp_num;
        check_rc(rdma_accept(request.get(), &param), "rdma_accept(SIDR reply, again)");
        ++answered;
    }
    return answered;
}

} // namespace rdma_samples
