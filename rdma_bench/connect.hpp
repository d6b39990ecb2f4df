/**
 * @file connect.hpp
 * @brief How the two sides of rdma_bench connect their -q QPs, with the exchange of the earlier lessons:
 * a pair of descriptor files or an RDMA CM connection per QP, the responder's buffer exported to QP 0,
 * and the requester's landing region told in-band, with a SEND. Each side checks what the other exports
 * against what it is about to move.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/exchange.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/verbs.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdma_bench {

/**
 * @brief Step 1 of both sides: stop at once when the device cannot run this measurement. iWARP connects
 * only through RDMA CM (rdma_write's step 4); siw has no immediate data (require_immediate_data()) and
 * no atomics, so it cannot measure them.
 * @param dev the open device @param args -cm @param opt --op
 * @throws rdma_samples::Error naming what the device lacks
 */
inline void require_device_for(const rdma_samples::Device &dev, const rdma_samples::Args &args, const Options &opt)
{
    rdma_samples::require_rdma_cm_on_iwarp(dev, args.use_cm);
    if (opt.op == Op::write_imm)
        rdma_samples::require_immediate_data(dev);
    if (opt.op == Op::atomic)
        rdma_samples::require_atomics(dev);
}

/**
 * @brief The requester's half: connect_to_responder() for each QP (args_for_qp()); the responder
 * exports its memory once, to QP 0. Refuses an export smaller than the @p slices bytes we would move.
 * @param args,opt    the flags and the knobs
 * @param dev,pd      our device and protection domain
 * @param qps         our QPs, in INIT
 * @param completions their CQ's completions (the set-up's poll loops)
 * @param rd_atomic   READs and atomics we may have in flight (max_rd_atomic)
 * @param slices      the bytes we move: a slice per QP
 * @return the exchanges; the first one's resource is the responder's export
 */
inline std::vector<rdma_samples::Exchange> connect_qps(const rdma_samples::Args &args, const Options &opt,
                                                       const rdma_samples::Device &dev, ibv_pd *pd,
                                                       const std::vector<rdma_samples::QpPtr> &qps,
                                                       rdma_samples::Completions &completions, int rd_atomic,
                                                       std::size_t slices)
{
    std::vector<rdma_samples::Exchange> exchanges;
    for (std::uint32_t i = 0; i < opt.qps; ++i)
        exchanges.push_back(rdma_samples::connect_to_responder({.args = args_for_qp(args, i, opt.qps),
                                                                .dev = dev,
                                                                .pd = pd,
                                                                .qp = qps[i].get(),
                                                                .completions = completions,
                                                                .peer = "the responder (rdma_bench_responder)",
                                                                .rd_atomic = rd_atomic},
                                                               i == 0 ? std::optional(rdma_samples::ResourceKind::mmap)
                                                                      : std::nullopt));
    const rdma_samples::ResourceDescriptor &peer = exchanges.front().resource;
    if (peer.length < slices)
        throw rdma_samples::Error("the responder exports " + std::to_string(peer.length) + " bytes, less than the " +
                                      std::to_string(slices) + " we would move",
                                  "start both sides with the same --size/--all and -q");
    rdma_samples::info("responder exports addr 0x%llx, length %u, rkey 0x%x",
                       static_cast<unsigned long long>(peer.addr), peer.length, peer.rkey);
    return exchanges;
}

/**
 * @brief The responder's half: accept_requester() for each QP (args_for_qp()), our buffer exported to
 * QP 0.
 * @param args,opt    the flags and the knobs
 * @param dev,pd      our device and protection domain
 * @param qps         our QPs, in INIT, their receives posted
 * @param completions their CQ's completions (the set-up's poll loops)
 * @param rd_atomic   READs and atomics the requester may have in flight here (max_dest_rd_atomic)
 * @param exported    our buffer's descriptor (describe_export())
 * @return the exchanges, for close_as_responder()
 */
inline std::vector<rdma_samples::Exchange> accept_qps(const rdma_samples::Args &args, const Options &opt,
                                                      const rdma_samples::Device &dev, ibv_pd *pd,
                                                      const std::vector<rdma_samples::QpPtr> &qps,
                                                      rdma_samples::Completions &completions, int rd_atomic,
                                                      rdma_samples::ResourceDescriptor &exported)
{
    std::vector<rdma_samples::Exchange> exchanges;
    for (std::uint32_t i = 0; i < opt.qps; ++i)
        exchanges.push_back(rdma_samples::accept_requester({.args = args_for_qp(args, i, opt.qps),
                                                            .dev = dev,
                                                            .pd = pd,
                                                            .qp = qps[i].get(),
                                                            .completions = completions,
                                                            .peer = "the requester (rdma_bench_requester)",
                                                            .rd_atomic = rd_atomic},
                                                           i == 0 ? &exported : nullptr));
    return exchanges;
}

/**
 * @brief The requester tells the responder where its landing region is (where a ping-pong's answers
 * land), with a SEND of a resource descriptor on QP 0: the responder posted the receive before we
 * connected.
 * @param pd,qp,completions our protection domain, QP 0 and its CQ's completions
 * @param mr          the memory region the landing region is part of
 * @param landing     its first byte
 * @param length      its length: a slice per QP
 * @param access      what it grants (remote write only when the responder answers by writing)
 * @param timeout_s   -t
 */
inline void send_landing(ibv_pd *pd, ibv_qp *qp, rdma_samples::Completions &completions, const ibv_mr *mr,
                         const char *landing, std::size_t length, int access, int timeout_s)
{
    rdma_samples::ResourceDescriptor ours =
        rdma_samples::describe_export(mr, access, rdma_samples::ResourceKind::mmap, static_cast<std::uint32_t>(length));
    ours.addr = reinterpret_cast<std::uintptr_t>(landing); // (part of the region, not its start)
    ours.nonce = rdma_samples::new_nonce();
    rdma_samples::send_descriptor(pd, qp, completions, rdma_samples::format_descriptor(ours), timeout_s);
    rdma_samples::info("we sent ours in-band: addr 0x%llx, length %u, rkey 0x%x",
                       static_cast<unsigned long long>(ours.addr), ours.length, ours.rkey);
}

/**
 * @brief The responder reads the requester's landing region from the SEND and checks it: a WRITE
 * ping-pong answers into it, so only inside what the requester exported, and only if it granted remote
 * write (the requester checks our export the same way, in connect_qps()).
 * @param text   the SEND's text
 * @param opt    the knobs
 * @param slices the bytes we would write there: a slice per QP
 * @return the landing region's descriptor
 */
inline rdma_samples::ResourceDescriptor landing_of(const std::string &text, const Options &opt, std::size_t slices)
{
    const rdma_samples::ResourceDescriptor peer =
        rdma_samples::parse_resource_descriptor(text, "the requester's SEND", rdma_samples::ResourceKind::mmap);
    rdma_samples::info("requester's landing region: addr 0x%llx, length %u, rkey 0x%x",
                       static_cast<unsigned long long>(peer.addr), peer.length, peer.rkey);
    if (opt.answers_by_write() && (peer.length < slices || !(peer.access & IBV_ACCESS_REMOTE_WRITE)))
        throw rdma_samples::Error("the requester's landing region (" + std::to_string(peer.length) + " bytes, " +
                                      rdma_samples::access_to_string(peer.access) + ") cannot take our " +
                                      std::to_string(slices) + "-byte answers by remote write",
                                  "start both sides with the same --op, --mode, --size/--all and -q");
    return peer;
}

} // namespace rdma_bench
