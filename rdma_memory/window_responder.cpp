/**
 * @file window_responder.cpp
 * @brief Memory windows, responder side: grant the requester part of a registered region, for a while,
 * then take it back.
 *
 * Every other lesson exports a whole memory region through its rkey, for as long as the region lives.
 * A memory window is a second key to part of a region: the responder binds it over the bytes it wants
 * to share, with the access it wants to grant, hands out the window's rkey instead of the region's, and
 * revokes it when the grant ends, without deregistering anything. The region itself grants no remote
 * access at all; the requester never learns its rkey.
 *
 * Two kinds: a type 1 window is bound with ibv_bind_mw() and revoked by binding it again with length 0;
 * a type 2 window is bound by a work request on our QP (IBV_WR_BIND_MW), works through that QP only,
 * and is revoked by IBV_WR_LOCAL_INV or by the requester's SEND with invalidate (--invalidate, on its
 * side). window.hpp has the conversation.
 */
#include "window.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <algorithm>
#include <cstring>
#include <string>

using namespace rdma_samples;

namespace rdma_memory {
namespace {

void run(const Args &args, const WindowResponderOptions &opt)
{
    step(1, "open an RDMA device, check that it has type %d memory windows, allocate a protection domain", opt.type);
    Device dev = open_device(args.device, args.gid_index);
    window::require_windows(dev, opt.type);
    require_rdma_cm_on_iwarp(dev, args.use_cm);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s), up to %d memory windows", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str(), dev.device_attr.max_mw);

    step(2, "register a %zu-byte region that grants no remote access, only the right to bind windows",
         window::region_size);
    Buffer region(window::region_size); // zero-filled: any byte that changes outside the window shows
    //! [reg_mr]
    // No IBV_ACCESS_REMOTE_*: the region's own rkey opens nothing. IBV_ACCESS_MW_BIND lets windows be
    // bound over it, and a window that grants remote write needs local write on its region too.
    const int region_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
    MrPtr mr(check(ibv_reg_mr(pd.get(), region.data(), region.size(), region_access), "ibv_reg_mr"));
    //! [reg_mr]

    step(3, "create a completion queue and an RC queue pair that accepts remote writes");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, IBV_ACCESS_REMOTE_WRITE); // the QP must allow what the window grants
    Completions completions(cq.get());
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post the receives for the requester's three signals: grant me a window, done, goodbye");
    post_empty_receive(qp.get(), mr.get(), window::request_wr_id, "ibv_post_recv(request)");
    post_empty_receive(qp.get(), mr.get(), window::done_wr_id, "ibv_post_recv(done)");
    post_goodbye_receive(qp.get(), mr.get());

    step(5, args.use_cm ? "wait for the requester to connect with RDMA CM"
                        : "wait for the requester, move the QP to RTR and RTS");
    Exchange exchange = accept_requester({.args = args,
                                          .dev = dev,
                                          .pd = pd.get(),
                                          .qp = qp.get(),
                                          .completions = completions,
                                          .peer = "the requester (rdma_memory_window_requester)"});

    step(6, "wait for the requester's request, bind a type %d window over bytes %u to %u, send its descriptor",
         opt.type, opt.offset, opt.offset + opt.length);
    completions.wait(window::request_wr_id, IBV_WC_RECV, args.timeout_s, "the requester's request for a window");
    MwPtr mw(check(ibv_alloc_mw(pd.get(), opt.type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2), "ibv_alloc_mw"));
    //! [bind]
    // What the window covers and grants: a sub-range of the region, remote write only.
    ibv_mw_bind_info bind_info{};
    bind_info.mr = mr.get();
    bind_info.addr = reinterpret_cast<std::uintptr_t>(region.data()) + opt.offset;
    bind_info.length = opt.length;
    bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
    std::uint32_t rkey = 0;
    if (opt.type == 1) {
        // Type 1: a verb. ibv_bind_mw() posts the bind on our send queue and gives the window its new
        // rkey at once; the bind is done when its completion (IBV_WC_BIND_MW) comes.
        ibv_mw_bind bind{};
        bind.wr_id = window::bind_wr_id;
        bind.send_flags = IBV_SEND_SIGNALED;
        bind.bind_info = bind_info;
        check_rc(ibv_bind_mw(qp.get(), mw.get(), &bind), "ibv_bind_mw");
        rkey = mw->rkey;
    } else {
        // Type 2: a work request we post ourselves. We choose the window's next rkey: the same index,
        // the low 8 bits (the "key") counted up, so that the rkey of an earlier grant never works again.
        rkey = ibv_inc_rkey(mw->rkey);
        ibv_send_wr wr{};
        wr.wr_id = window::bind_wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.bind_mw.mw = mw.get();
        wr.bind_mw.rkey = rkey;
        wr.bind_mw.bind_info = bind_info;
        ibv_send_wr *bad_wr = nullptr;
        check_post(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send(BIND_MW)");
    }
    completions.wait(window::bind_wr_id, IBV_WC_BIND_MW, args.timeout_s, "the window's bind");
    //! [bind]
    // --offset and --length may ask for a window past the region, to see the device refuse the bind
    // (IBV_WC_MW_BIND_ERR, above). A device that bound it anyway must not make us read past our buffer.
    if (std::size_t{opt.offset} + opt.length > region.size())
        throw Error("the device bound a window past the end of its region", "check dmesg; this device is broken");
    //! [export]
    // The descriptor names the window: its first byte, its length, its rkey. Not the region's.
    ResourceDescriptor grant{};
    grant.nonce = new_nonce();
    grant.addr = bind_info.addr;
    grant.length = opt.length;
    grant.rkey = rkey;
    grant.access = IBV_ACCESS_REMOTE_WRITE;
    send_descriptor(pd.get(), qp.get(), completions, format_descriptor(grant), args.timeout_s);
    //! [export]
    info("granted: addr 0x%llx, length %u, rkey 0x%x (the region's rkey 0x%x stays ours), access %s",
         static_cast<unsigned long long>(grant.addr), grant.length, rkey, mr->rkey,
         access_to_string(grant.access).c_str());

    step(7, "wait for the requester's \"done\"; check the window and the bytes around it");
    // Our memory is checked before the completion: if the requester's WRITE was refused, the connection
    // broke and this receive is flushed, and what the refusal left of our memory is the lesson.
    const ibv_wc done = completions.poll_for(window::done_wr_id, args.timeout_s, "the requester's \"done\"");
    window::check_window(region, opt);
    completions.check(done, IBV_WC_RECV, "the requester's \"done\"");

    //! [revoke]
    const bool revoked_by_peer = (done.wc_flags & IBV_WC_WITH_INV) != 0 && done.invalidated_rkey == rkey;
    if (revoked_by_peer) {
        step(8, "nothing to revoke: the requester's SEND with invalidate revoked rkey 0x%x as it arrived",
             done.invalidated_rkey);
    } else if (opt.type == 1) {
        step(8, "revoke the window: bind it again with length 0");
        // Length 0 unbinds. The man page allows bind_info.mr to be NULL here, but Soft-RoCE's provider
        // (rdma-core up to at least v44) reads the region's lkey from it and crashes: name the region.
        ibv_mw_bind unbind{};
        unbind.wr_id = window::bind_wr_id;
        unbind.send_flags = IBV_SEND_SIGNALED;
        unbind.bind_info.mr = mr.get(); // length 0, no access: the window covers nothing
        check_rc(ibv_bind_mw(qp.get(), mw.get(), &unbind), "ibv_bind_mw(length 0)");
        completions.wait(window::bind_wr_id, IBV_WC_BIND_MW, args.timeout_s, "the window's unbind");
    } else {
        step(8, "revoke the window: invalidate rkey 0x%x (IBV_WR_LOCAL_INV)", rkey);
        ibv_send_wr inv{};
        inv.wr_id = window::invalidate_wr_id;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.invalidate_rkey = rkey;
        inv.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr *bad_wr = nullptr;
        check_post(ibv_post_send(qp.get(), &inv, &bad_wr), "ibv_post_send(LOCAL_INV)");
        completions.wait(window::invalidate_wr_id, IBV_WC_LOCAL_INV, args.timeout_s, "the window's invalidation");
    }
    //! [revoke]
    const std::string at_revocation(region.data(), region.size());
    window::post_empty_send(qp.get(), window::revoked_wr_id, "ibv_post_send(SEND, revoked)");
    completions.wait(window::revoked_wr_id, IBV_WC_SEND, args.timeout_s, "the \"revoked\" SEND");
    info("told the requester: rkey 0x%x is revoked", rkey);

    step(9, "wait for the goodbye; no byte of the region may have changed since the revocation");
    const ibv_wc bye = completions.poll_for(goodbye_wr_id, args.timeout_s, "the requester's goodbye");
    if (std::memcmp(region.data(), at_revocation.data(), region.size()) != 0)
        throw Error("the region changed after its window was revoked", "this should never happen; check dmesg");
    result("Since the revocation: all %zu bytes unchanged", region.size());
    completions.check(bye, IBV_WC_RECV, "the requester's goodbye");

    step(10, args.use_cm ? "disconnect from the requester (RDMA CM)"
                         : "keep the QP a moment: if our ACK of the goodbye was lost, the requester resends it");
    close_as_responder(exchange, args.timeout_s);
}

} // namespace
} // namespace rdma_memory

int main(int argc, char **argv)
{
    rdma_memory::WindowResponderOptions opt;
    ProgramSpec spec{.name = "rdma_memory_window_responder",
                     .role = "responder",
                     .summary = "Memory windows, responder side: grant part of a region, then revoke the grant.",
                     .resource_descriptor = false,
                     .rdma_cm = true};
    spec.extra = opt.flags();
    return run_sample(spec, argc, argv, [&](const Args &args) { rdma_memory::run(args, opt); });
}
