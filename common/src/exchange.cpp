/** @file exchange.cpp @brief The connection step: descriptor files or RDMA CM, and the in-band descriptor. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/rc_qp.hpp>

#include <chrono>
#include <cstring>
#include <thread>

namespace rdma_samples {

DescriptorReceive::DescriptorReceive(ibv_pd *pd, ibv_qp *qp) : buf_(max_descriptor_size)
{
    // Local write: the device writes the incoming message into this buffer. Nothing remote.
    mr_.reset(
        check(ibv_reg_mr(pd, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr(descriptor receive)"));
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf_.data());
    sge.length = static_cast<std::uint32_t>(buf_.size());
    sge.lkey = mr_->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = descriptor_recv_wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    check_post(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv(descriptor, " + std::to_string(buf_.size()) + " bytes)");
}

std::string DescriptorReceive::wait(Completions &completions, int timeout_s)
{
    const ibv_wc wc = completions.wait(descriptor_recv_wr_id, IBV_WC_RECV, timeout_s,
                                       "the peer's descriptor (a SEND right after connecting)");
    return std::string(buf_.data(), wc.byte_len);
}

void send_descriptor(ibv_pd *pd, ibv_qp *qp, Completions &completions, const std::string &text, int timeout_s)
{
    if (text.size() > max_descriptor_size)
        throw Error("the descriptor is " + std::to_string(text.size()) + " bytes, more than the peer's receive holds",
                    "a bug: descriptors are a few hundred bytes");
    Buffer buf(text.size());
    std::memcpy(buf.data(), text.data(), text.size());
    // The source of a SEND is only read locally: no access flags at all.
    MrPtr mr(check(ibv_reg_mr(pd, buf.data(), buf.size(), 0), "ibv_reg_mr(descriptor send)"));
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    sge.length = static_cast<std::uint32_t>(text.size());
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = descriptor_wr_id;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    check_post(ibv_post_send(qp, &wr, &bad), "ibv_post_send(SEND, descriptor)");
    completions.wait(descriptor_wr_id, IBV_WC_SEND, timeout_s, "the descriptor SEND");
}

Exchange connect_to_responder(const ExchangeParams &p, std::optional<ResourceKind> resource)
{
    Exchange exchange;
    if (p.args.use_cm) {
        // The responder SENDs its descriptor the moment it accepts: our receive must already be there.
        std::optional<DescriptorReceive> text;
        if (resource)
            text.emplace(p.pd, p.qp);
        exchange.cm = cm_connect(p.args.cm_server(), p.args.timeout_s, p.dev, p.qp, p.rd_atomic);
        if (text) {
            exchange.resource =
                parse_resource_descriptor(text->wait(p.completions, p.args.timeout_s), p.peer + "'s SEND", *resource);
            info("received the %s descriptor of %s, in-band", resource_kind_name(*resource), p.peer.c_str());
        }
        return exchange;
    }
    const std::uint32_t psn = random_psn();
    const ConnectionDescriptor local = describe_qp(p.qp, p.dev, psn, new_nonce());
    write_descriptor_file(p.args.local_descriptor_path, format_descriptor(local));
    info("wrote %s: QPN 0x%06x, PSN 0x%06x, GID %s", p.args.local_descriptor_path.c_str(), local.qp_num, local.psn,
         gid_to_string(local.gid).c_str());
    const ConnectionDescriptor remote =
        wait_for_connection_descriptor({p.args.remote_descriptor_path, p.peer, p.args.timeout_s, local.nonce});
    info("peer: QPN 0x%06x, PSN 0x%06x, GID %s", remote.qp_num, remote.psn, gid_to_string(remote.gid).c_str());
    qp_to_rtr(p.qp, p.dev, remote);
    qp_to_rts(p.qp, psn, p.rd_atomic);
    if (resource)
        exchange.resource = wait_for_resource_descriptor(
            {p.args.resource_descriptor_path, p.peer, p.args.timeout_s, local.nonce}, *resource);
    return exchange;
}

Exchange accept_requester(const ExchangeParams &p, ResourceDescriptor *resource)
{
    Exchange exchange;
    exchange.qp = p.qp;
    if (p.args.use_cm) {
        exchange.cm = cm_accept(p.args.listen_port, p.args.timeout_s, p.dev, p.qp, p.rd_atomic);
        if (resource) {
            resource->nonce = new_nonce();
            // The requester posted its receive for this before it connected: the SEND finds it.
            send_descriptor(p.pd, p.qp, p.completions, format_descriptor(*resource), p.args.timeout_s);
            info("sent our %s descriptor in-band: addr 0x%llx, length %u, rkey 0x%x, access %s",
                 resource_kind_name(resource->kind), static_cast<unsigned long long>(resource->addr), resource->length,
                 resource->rkey, access_to_string(resource->access).c_str());
        }
        return exchange;
    }
    const ConnectionDescriptor remote =
        wait_for_connection_descriptor({p.args.remote_descriptor_path, p.peer, p.args.timeout_s, {}});
    info("peer: QPN 0x%06x, PSN 0x%06x, GID %s", remote.qp_num, remote.psn, gid_to_string(remote.gid).c_str());
    const std::uint32_t psn = random_psn();
    qp_to_rtr(p.qp, p.dev, remote, p.rd_atomic);
    qp_to_rts(p.qp, psn);
    // Answer only now that the QP accepts packets: nothing the requester posts can find it unready.
    ConnectionDescriptor local = describe_qp(p.qp, p.dev, psn, new_nonce());
    local.peer_nonce = remote.nonce;
    if (resource) {
        resource->nonce = local.nonce;
        resource->peer_nonce = remote.nonce;
        write_descriptor_file(p.args.resource_descriptor_path, format_descriptor(*resource));
        info("wrote %s: addr 0x%llx, length %u, rkey 0x%x, access %s", p.args.resource_descriptor_path.c_str(),
             static_cast<unsigned long long>(resource->addr), resource->length, resource->rkey,
             access_to_string(resource->access).c_str());
    }
    write_descriptor_file(p.args.local_descriptor_path, format_descriptor(local));
    info("wrote %s: QPN 0x%06x, PSN 0x%06x, GID %s", p.args.local_descriptor_path.c_str(), local.qp_num, local.psn,
         gid_to_string(local.gid).c_str());
    return exchange;
}

ResourceDescriptor describe_export(const ibv_mr *mr, int access, ResourceKind kind, std::uint32_t length)
{
    ResourceDescriptor d{};
    d.kind = kind;
    d.addr = reinterpret_cast<std::uintptr_t>(mr->addr);
    d.length = length ? length : static_cast<std::uint32_t>(mr->length);
    d.rkey = mr->rkey;
    d.access = access;
    return d;
}

void post_empty_receive(ibv_qp *qp, const ibv_mr *mr, std::uint64_t wr_id, const std::string &what)
{
    ibv_sge none{}; // one entry of length 0: Soft-iWARP's provider refuses a receive with no entry
    none.addr = reinterpret_cast<std::uintptr_t>(mr->addr);
    none.length = 0;
    none.lkey = mr->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &none;
    wr.num_sge = 1;
    ibv_recv_wr *bad_wr = nullptr;
    check_post(ibv_post_recv(qp, &wr, &bad_wr), what);
}

void post_goodbye_receive(ibv_qp *qp, const ibv_mr *mr)
{
    post_empty_receive(qp, mr, goodbye_wr_id, "ibv_post_recv(goodbye)");
}

void say_goodbye(ibv_qp *qp, Completions &completions, int timeout_s)
{
    ibv_send_wr bye{}; // no scatter/gather list: zero bytes
    bye.wr_id = goodbye_wr_id;
    bye.opcode = IBV_WR_SEND;
    bye.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp, &bye, &bad_wr), "ibv_post_send(SEND, goodbye)");
    completions.wait(goodbye_wr_id, IBV_WC_SEND, timeout_s, "the goodbye SEND's completion");
}

void close_as_responder(Exchange &exchange, int timeout_s)
{
    if (exchange.cm.id) {
        cm_disconnect(exchange.cm, timeout_s);
        return;
    }
    const int linger_ms = retransmit_window_ms(exchange.qp);
    info("keeping the QP %d ms, in case our last ACK was lost and the peer resends", linger_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(linger_ms));
}

} // namespace rdma_samples
