/**
 * @file window_requester.cpp
 * @brief Memory windows, requester side: write through a window the responder grants, for as long as
 * it grants it.
 *
 * The requester asks for a window, receives its descriptor (address, length, rkey of the window, not
 * of the responder's region), writes its message into it, and says "done". The responder revokes the
 * window and says so. Two demonstrations show the device enforce the grant: --past-window writes one
 * byte past the window's end, --after-revoke writes through the window's rkey after the revocation.
 * On a NIC both fail with IBV_WC_REM_ACCESS_ERR and the responder's memory stays as it was; Soft-RoCE
 * refuses the second but lets the first land (rxe checks a window's rkey, access and region, not its
 * bounds: chapter 18), and this side then says so. --invalidate ends
 * the grant from this side: "done" is a SEND with invalidate, which revokes a type 2 window as it
 * arrives. window.hpp has the conversation.
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
#include <rdma_samples/wait.hpp>

#include <cstring>
#include <string>

using namespace rdma_samples;

namespace rdma_memory {
namespace {

/** @brief Post an RDMA WRITE of @p len bytes of @p mr's buffer to @p remote_addr through @p rkey, and
 *  wait for its completion. */
void write_through(ibv_qp *qp, Completions &completions, const ibv_mr *mr, std::uint32_t len, std::uint64_t remote_addr,
                   std::uint32_t rkey, int timeout_s, const std::string &what)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(mr->addr);
    sge.length = len;
    sge.lkey = mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey; // the window's rkey: what the responder granted, and only that
    ibv_send_wr *bad_wr = nullptr;
    check_post(ibv_post_send(qp, &wr, &bad_wr), "ibv_post_send(RDMA_WRITE)");
    completions.wait(1, IBV_WC_RDMA_WRITE, timeout_s, what);
}

void run(const Args &args, const WindowRequesterOptions &opt)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    window::require_windows(dev);
    require_rdma_cm_on_iwarp(dev, args.use_cm);
    //! [soft_roce]
    // Soft-RoCE (vendor ID 0xffffff) in Linux 6.1 panics the kernel when a SEND with invalidate names
    // a type 2 window (a NULL pointer in __rxe_put, in the responder's receive path): refuse it there.
    if (opt.invalidate && dev.device_attr.vendor_id == 0xffffff)
        throw Error("--invalidate: " + dev.name +
                        " is Soft-RoCE, whose kernel driver (Linux 6.1) crashes the responder's machine when a SEND "
                        "with invalidate names a memory window",
                    "leave out --invalidate (the responder then revokes the window itself), or use a NIC");
    //! [soft_roce]
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, port %u, GID index %d (%s)", dev.name.c_str(), dev.port, dev.gid_index,
         gid_to_string(dev.gid).c_str());

    step(2, "register the %zu-byte message \"%s\" (local only: the device reads it for the WRITE)", args.message.size(),
         args.message.c_str());
    if (args.message.empty())
        throw Error("nothing to write: the message is empty", "give -w a string of 1 to 256 bytes");
    Buffer buf(args.message.size());
    std::memcpy(buf.data(), args.message.data(), args.message.size());
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), 0), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair");
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    qp_to_init(qp.get(), dev, 0); // we only initiate: the responder may do nothing to our memory
    Completions completions(cq.get());
    info("QPN 0x%06x, state INIT", qp->qp_num);

    step(4, "post the receives for the window's descriptor and for \"revoked\", then connect");
    DescriptorReceive descriptor(pd.get(), qp.get());
    post_empty_receive(qp.get(), mr.get(), window::revoked_wr_id, "ibv_post_recv(revoked)");
    Exchange exchange = connect_to_responder({.args = args,
                                              .dev = dev,
                                              .pd = pd.get(),
                                              .qp = qp.get(),
                                              .completions = completions,
                                              .peer = "the responder (rdma_memory_window_responder)"});

    step(5, "ask for a window and wait for its descriptor");
    window::post_empty_send(qp.get(), window::request_wr_id, "ibv_post_send(SEND, request)");
    completions.wait(window::request_wr_id, IBV_WC_SEND, args.timeout_s, "the request SEND");
    const ResourceDescriptor grant =
        parse_resource_descriptor(descriptor.wait(completions, args.timeout_s),
                                  "the responder (rdma_memory_window_responder)'s SEND", ResourceKind::mmap);
    info("granted: addr 0x%llx, length %u, rkey 0x%x, access %s", static_cast<unsigned long long>(grant.addr),
         grant.length, grant.rkey, access_to_string(grant.access).c_str());

    const auto len = static_cast<std::uint32_t>(args.message.size());
    //! [range_check]
    // Where the WRITE lands: the window's first byte; with --past-window, so that its last byte is one
    // past the window's end, a request we would never post, posted to see the device refuse it.
    const std::uint64_t at = opt.past_window ? grant.addr + grant.length - len + 1 : grant.addr;
    step(6, "check the WRITE stays inside the window%s", opt.past_window ? " (demonstration: it does not)" : "");
    if (!(grant.access & IBV_ACCESS_REMOTE_WRITE))
        throw Error("the window does not grant remote write (access " + access_to_string(grant.access) + ")",
                    "the responder must bind its window with IBV_ACCESS_REMOTE_WRITE");
    if (len > grant.length)
        throw Error("the message is " + std::to_string(len) + " bytes and the window " + std::to_string(grant.length) +
                        "; nothing was posted",
                    "send at most " + std::to_string(grant.length) + " bytes (-w), or ask for a longer window");
    if (opt.past_window)
        info("(demonstration) writing bytes 0x%llx to 0x%llx: the last one is past the window",
             static_cast<unsigned long long>(at), static_cast<unsigned long long>(at + len - 1));
    //! [range_check]

    step(7, "RDMA WRITE the message into the window");
    write_through(qp.get(), completions, mr.get(), len, at, grant.rkey, args.timeout_s,
                  opt.past_window ? "the RDMA WRITE past the window's end" : "the RDMA WRITE into the window");
    if (opt.past_window) {
        // The device should have refused it. Say "done" anyway: the responder then checks its memory
        // and reports the byte that landed outside the window.
        window::post_empty_send(qp.get(), window::done_wr_id, "ibv_post_send(SEND, done)");
        completions.wait(window::done_wr_id, IBV_WC_SEND, args.timeout_s, "the \"done\" SEND");
        throw Error("the RDMA WRITE past the window's end succeeded",
                    "the responder's device did not hold the WRITE to the window's range: Soft-RoCE checks a window's "
                    "rkey, access and region, not its bounds (chapter 18); a NIC answers IBV_WC_REM_ACCESS_ERR");
    }
    result("Wrote \"%s\" through the window", args.message.c_str());

    //! [done]
    step(8,
         opt.invalidate ? "say \"done\" with a SEND with invalidate: it revokes rkey 0x%x as it arrives"
                        : "say \"done\"; the responder revokes the window (rkey 0x%x)",
         grant.rkey);
    window::post_empty_send(qp.get(), window::done_wr_id, "ibv_post_send(SEND, done)", opt.invalidate ? grant.rkey : 0);
    completions.wait(window::done_wr_id, IBV_WC_SEND, args.timeout_s, "the \"done\" SEND");
    //! [done]

    step(9, "wait for the responder's \"revoked\"");
    completions.wait(window::revoked_wr_id, IBV_WC_RECV, args.timeout_s, "the responder's \"revoked\"");
    if (opt.after_revoke) {
        info("(demonstration) the grant has ended: writing through rkey 0x%x again", grant.rkey);
        write_through(qp.get(), completions, mr.get(), len, grant.addr, grant.rkey, args.timeout_s,
                      "the RDMA WRITE through the revoked window");
        throw Error("the RDMA WRITE through the revoked window succeeded",
                    "the responder's device did not revoke the window");
    }

    step(10, "say goodbye with a zero-length SEND, so the responder may release its memory");
    say_goodbye(qp.get(), completions, args.timeout_s);

    if (args.use_cm) {
        step(11, "disconnect: RDMA CM tells the responder we are done");
        cm_disconnect(exchange.cm, args.timeout_s);
    }
}

} // namespace
} // namespace rdma_memory

int main(int argc, char **argv)
{
    rdma_memory::WindowRequesterOptions opt;
    ProgramSpec spec{.name = "rdma_memory_window_requester",
                     .role = "requester",
                     .summary = "Memory windows, requester side: write through the window the responder grants.",
                     .message_flag = 'w',
                     .message_help = "string to write into the window",
                     .resource_descriptor = false,
                     .rdma_cm = true};
    spec.extra = opt.flags();
    return run_sample(spec, argc, argv, [&](const Args &args) { rdma_memory::run(args, opt); });
}
