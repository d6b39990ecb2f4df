/**
 * @file exchange.hpp
 * @brief The connection step every pair after chapter 2 takes: find the peer, bring the QP to RTS,
 * and hand over what the responder exports, by descriptor files or (with `-cm`) by RDMA CM.
 *
 * rdma_write/requester.cpp and responder.cpp write both flows out in full; every later lesson moves
 * its QP to INIT itself (qp_to_init(), with the remote access its lesson grants) and then calls
 * connect_to_responder() or accept_requester(), the same way in every pair.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/completions.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/verbs.hpp>

#include <optional>
#include <string>

namespace rdma_samples {

/**
 * @brief A receive for the peer's descriptor text (an mmap or sync-event descriptor), sent in-band.
 *
 * With `-cm` there are no files: right after the connection, the responder SENDs the same text
 * format_descriptor() writes to a file. The requester posts this receive BEFORE connecting, so the
 * SEND always finds it (no RNR).
 */
class DescriptorReceive {
public:
    /**
     * @brief Register a buffer (local write: the device writes the message into it) and post it.
     * @param pd our protection domain
     * @param qp our QP, in INIT or later
     */
    DescriptorReceive(ibv_pd *pd, ibv_qp *qp);
    /**
     * @brief Wait (bounded) for the receive's completion (wr_id descriptor_recv_wr_id).
     * @param completions      the QP's CQ's completions
     * @param timeout_s the bound
     * @return the text received
     */
    std::string wait(Completions &completions, int timeout_s);

private:
    Buffer buf_;
    MrPtr mr_;
};

/**
 * @brief SEND @p text (a descriptor) on the connected @p qp and wait for its completion.
 * The peer may answer (its goodbye SEND, say) before this SEND's ACK comes back: its message then
 * completes first, and @p completions keeps it for the wait that wants it.
 * @param pd,qp      our protection domain and QP
 * @param completions       the QP's CQ's completions (wr_id descriptor_wr_id)
 * @param text       what format_descriptor() returned
 * @param timeout_s  bound for the completion
 */
void send_descriptor(ibv_pd *pd, ibv_qp *qp, Completions &completions, const std::string &text, int timeout_s);

/**
 * @brief How the requester and responder found each other: by descriptor files or, with `-cm`, by
 * RDMA CM.
 */
struct Exchange {
    /// requester: what the responder exports, when connect_to_responder() was asked for it
    ResourceDescriptor resource;
    CmConnection cm;      ///< -cm: the connection, to close with cm_disconnect() at the end
    ibv_qp *qp = nullptr; ///< responder: our QP, whose timers size close_as_responder()'s linger
};

/**
 * @brief What both halves of the exchange are given, by name (designated initializers at the call):
 * the command line, our device, PD and QP, the QP's completions, and the peer.
 */
struct ExchangeParams {
    const Args &args;         ///< -ld, -re, -m, -t; -cm, -sa, -sat, -lp
    const Device &dev;        ///< our device
    ibv_pd *pd;               ///< our protection domain (-cm: for the descriptor's buffer)
    ibv_qp *qp;               ///< our QP, in INIT (qp_to_init(), in the sample); a responder's with every
                              ///< receive it needs already posted
    Completions &completions; ///< its CQ's completions (-cm: where the descriptor's SEND completes or arrives)
    std::string peer;         ///< the other side, for messages, e.g. "the responder (rdma_read_responder)"
    /// READs and atomics in flight: the requester's own at the responder (max_rd_atomic), or what the
    /// responder lets the requester have at it (max_dest_rd_atomic); 0 when the pair uses none
    int rd_atomic = 0;
};

/**
 * @brief The requester's half of the exchange, as rdma_write/requester.cpp writes it out.
 *
 * Descriptor files: publish our connection descriptor (-ld), wait for the responder's answer (-re,
 * naming our nonce), move the QP RTR -> RTS, then read the resource descriptor (-m), which the
 * responder wrote first.
 *
 * `-cm`: post a receive for the resource descriptor (a second, local-write-only memory region of
 * max_descriptor_size bytes, wr_id descriptor_recv_wr_id), connect to `-sa` (the CM moves the QP to RTR and
 * RTS), then take the descriptor the responder SENDs right after accepting.
 *
 * Either way, when this returns the responder's QP is ready to receive.
 * @param p        the command line, device, PD, QP, completions, peer and READ/atomic depth
 * @param resource the kind of descriptor the responder exports, or none (send/receive)
 * @return the exchange; its resource is filled in when @p resource was given
 */
Exchange connect_to_responder(const ExchangeParams &p, std::optional<ResourceKind> resource = std::nullopt);

/**
 * @brief The responder's half, as rdma_write/responder.cpp does it.
 *
 * Descriptor files: wait for the requester's descriptor (-re), move the QP to RTR and RTS, then publish
 * @p resource (if any, to -m) and our connection descriptor (-ld), both answering the requester's nonce.
 *
 * `-cm`: listen on `-lp`, accept the requester (the CM moves the QP to RTR and RTS), then SEND
 * @p resource (if any) over the new connection, from a buffer registered for that SEND alone, and wait
 * for its completion (wr_id descriptor_wr_id).
 * @param p        the command line, device, PD, QP, completions, peer and READ/atomic depth
 * @param resource the memory we export, or nullptr; its nonces are filled in here
 * @return the exchange
 */
Exchange accept_requester(const ExchangeParams &p, ResourceDescriptor *resource = nullptr);

/**
 * @brief What a responder exports, as rdma_write/responder.cpp writes it out: the registered range
 * (or its first @p length bytes), its rkey and the access it grants. The exchange adds the nonces.
 * @param mr     the memory region to export
 * @param access what the region grants (the flags it was registered with)
 * @param kind   an mmap, or a sync event (chapter 8)
 * @param length bytes from the start of the region; 0: all of it
 * @return the descriptor, for accept_requester()
 */
ResourceDescriptor describe_export(const ibv_mr *mr, int access, ResourceKind kind = ResourceKind::mmap,
                                   std::uint32_t length = 0);

/**
 * @brief A receive for a zero-length message (a signal, such as the goodbye), as
 * rdma_write/responder.cpp's step 4 writes it out: one scatter/gather entry of length 0 in @p mr (the
 * message carries no data, so nothing lands; Soft-iWARP's user-space provider refuses a receive with no
 * entry at all). Receives are consumed in the order they were posted.
 * @param qp    our QP, in INIT or later
 * @param mr    a memory region of ours, named by the empty entry (nothing is written to it)
 * @param wr_id which message it waits for
 * @param what  the message, for the error, e.g. "ibv_post_recv(goodbye)"
 */
void post_empty_receive(ibv_qp *qp, const ibv_mr *mr, std::uint64_t wr_id, const std::string &what);

/**
 * @brief The responder's receive for the goodbye: post_empty_receive() with wr_id goodbye_wr_id.
 * Post it before the requester can reach the QP, so that the goodbye never meets "Receiver Not Ready".
 * @param qp our QP, in INIT or later
 * @param mr a memory region of ours, named by the empty entry (nothing is written to it)
 */
void post_goodbye_receive(ibv_qp *qp, const ibv_mr *mr);

/**
 * @brief The requester's goodbye, as rdma_write/requester.cpp's step 8 writes it out: post a
 * zero-length SEND (wr_id goodbye_wr_id, no scatter/gather list), which consumes the receive the
 * responder posted before it could be reached, and wait (bounded) for its completion.
 *
 * On RC the SEND arrives after every request posted before it on the same QP, so its arrival tells
 * the responder that our WRITEs, READs or atomics are complete in its memory. Its completion on our
 * side means its ACK came back: the responder has it.
 * @param qp          our QP, at RTS
 * @param completions its CQ's completions
 * @param timeout_s   the bound (-t)
 */
void say_goodbye(ibv_qp *qp, Completions &completions, int timeout_s);

/**
 * @brief The responder's end of the connection, once the requester's last message has arrived.
 *
 * Our ACK of that message may have been lost; the requester then resends it for up to
 * retransmit_window_ms() (the IBTA worst case for the QP's timeout and retry_cnt), and only a QP that
 * still exists can acknowledge it again (TCP calls this TIME_WAIT). `-cm`: cm_disconnect(): the
 * requester answers our DREQ only after its last completion, so the QP stays up as long as it is
 * needed, whatever the NIC's retransmission timing. Descriptor files: keep the QP for
 * retransmit_window_ms(), a best effort (rc_qp.hpp says what a NIC may do differently).
 * @param exchange  the exchange
 * @param timeout_s the bound of the disconnect (-t)
 */
void close_as_responder(Exchange &exchange, int timeout_s);

} // namespace rdma_samples
