/**
 * @file receiver.cpp
 * @brief RECEIVE, receiver side: post a receive, then let the sender fill it.
 *
 * A SEND consumes the first receive posted on the receiving QP. If none is posted when it arrives, the
 * receiver's device answers "Receiver Not Ready" and the sender retries, then fails. So the receive is
 * posted first, before this side publishes anything the sender could act on.
 */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/wait.hpp>

using namespace rdma_samples;

namespace {
std::size_t recv_size = max_message_length; // --recv-size: shrink it to see IBV_WC_LOC_LEN_ERR
bool prepost = true;                         // --no-prepost-receive: see IBV_WC_RNR_RETRY_EXC_ERR
} // namespace

static void run(const Args &args)
{
    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    info("device %s, GID index %d (%s)", dev.name.c_str(), dev.gid_index, gid_to_string(dev.gid).c_str());

    step(2, "register a %zu-byte receive buffer (local read/write: the device writes into it)", recv_size);
    Buffer buf(recv_size);
    MrPtr mr(check(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));

    step(3, "create a completion queue and an RC queue pair (no remote access: SEND needs none)");
    // Room for every completion that can be outstanding: 16 send + 16 receive requests (chapter 2).
    CqPtr cq(check(ibv_create_cq(dev.ctx.get(), cq_entries(QpCaps{}), nullptr, nullptr, 0), "ibv_create_cq"));
    QpPtr qp = create_rc_qp(pd.get(), cq.get());
    Completions done(cq.get()); // every wait finds its own completion by wr_id
    qp_to_init(qp.get(), dev, 0);
    info("QPN 0x%06x, state INIT", qp->qp_num);

    if (prepost) {
        step(4, "post a receive for up to %zu bytes BEFORE the sender can send", recv_size);
        //! [post_recv]
        ibv_sge sge{};
        sge.addr = reinterpret_cast<std::uintptr_t>(buf.data());
        sge.length = static_cast<std::uint32_t>(buf.size()); // a longer message fails: IBV_WC_LOC_LEN_ERR
        sge.lkey = mr->lkey;
        ibv_recv_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_rc(ibv_post_recv(qp.get(), &wr, &bad_wr), "ibv_post_recv");
        //! [post_recv]
    } else {
        step(4, "(demonstration) post NO receive: the sender's SEND will find nothing to fill");
    }

    step(5, args.use_cm ? "wait for the sender to connect with RDMA CM; the CM moves the QP to RTR and RTS"
                        : "wait for the sender's descriptor, move the QP to RTR and RTS, answer it");
    Exchange x = accept_requester(args, dev, pd.get(), qp.get(), done, "the sender (rdma_send)");

    step(6, "poll the completion queue until the message has arrived");
    const ibv_wc wc = done.wait(1, IBV_WC_RECV, args.timeout_s, "the message from the sender");
    // byte_len is how many bytes the SEND carried: the buffer holds exactly those.
    result("Got from sender: \"%.*s\"", static_cast<int>(wc.byte_len), buf.data());

    if (args.use_cm) {
        step(7, "disconnect from the sender (RDMA CM)");
        cm_disconnect(x.cm, args.timeout_s);
    }
}

int main(int argc, char **argv)
{
    ProgramSpec spec{.name = "rdma_receive",
                     .role = "receiver",
                     .summary = "RECEIVE, receiver side: post a receive and print what the sender sends into it.",
                     .resource_descriptor = false,
                     .rdma_cm = true};
    spec.extra.push_back({"recv-size", "BYTES", "size of the posted receive buffer; smaller than the message shows IBV_WC_LOC_LEN_ERR",
                          std::to_string(max_message_length), [](const std::string &v) {
                              recv_size = parse_number("--recv-size", v, 1, max_message_length);
                          }});
    spec.extra.push_back({"no-prepost-receive", "", "demonstration: post no receive, so the SEND fails with RNR retry exceeded",
                          "", [](const std::string &) { prepost = false; }});
    return run_sample(spec, argc, argv, run);
}
