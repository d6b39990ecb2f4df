/**
 * @file protocol.hpp
 * @brief rdma_file_transfer's control protocol: one fixed-size message, versioned, in little-endian,
 * and the checks every message from the peer passes before any of its fields is used.
 *
 * Everything the two sides say to each other besides the file's bytes is a ControlMessage SENT into a
 * receive the peer posted: the offer (length, name), the ring (addr, rkey, chunk, slots), "done" (length,
 * digest), the verdict, the ID and the key. A message is always the same 456 bytes, so one receive
 * buffer of that size fits any of them. Credits carry no bytes at all: they are zero-length SENDs whose
 * immediate value names the slot.
 *
 * A message starts with a magic number and the protocol version. A peer that speaks another version
 * is refused with a message it can still read: magic, version and type keep their place in every
 * version to come.
 *
 * Version 2 (this one) sends the digest with "done", after the data, so that each side hashes the file
 * once, while the bytes move; version 1 sent it in the offer, so the sender read the whole file twice
 * and the receiver waited for that first pass before the first byte came.
 */
#pragma once

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/text.hpp>

#include <endian.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace file_transfer {

inline constexpr std::uint32_t protocol_magic = 0x52444654; ///< "RDFT"
inline constexpr std::uint16_t protocol_version = 2;        ///< what this build speaks
inline constexpr std::size_t max_text = 384;                ///< bytes of text a message carries (with its NUL)
inline constexpr std::uint32_t max_chunk = 1U << 30;        ///< the largest slot either side accepts (1 GiB)
inline constexpr std::uint64_t max_ring_bytes = 1ULL << 30; ///< the largest ring (slots x chunk) either side accepts

/** @brief What a ControlMessage says. */
enum class MessageType : std::uint16_t {
    offer = 1,   ///< sender: length, name (workflow step 2)
    ring = 2,    ///< receiver: addr, rkey, chunk, slots of the ring (step 3)
    refusal = 3, ///< either side: why it stops (text); the connection ends
    verdict = 4, ///< receiver: flags 1 = the digest matched (step 5), and the digest it computed
    id = 5,      ///< sender: who it is (step 6)
    key = 6,     ///< receiver: the secret key for that ID (step 7)
    receipt = 7, ///< receiver without --keys: a receipt instead of a key (step 7)
    done = 8,    ///< sender: every chunk is out; length and digest of what was sent (step 4)
};

/** @brief The name of message type @p type, for errors. @param type as received @return e.g. "offer" */
inline std::string type_name(std::uint16_t type)
{
    static const char *const names[] = {"offer", "ring", "refusal", "verdict", "id", "key", "receipt", "done"};
    if (type >= 1 && type <= 8)
        return names[type - 1];
    return "unknown type " + std::to_string(type);
}

/** @brief The one message of the protocol, as it travels (packed; multi-byte fields little-endian). */
struct [[gnu::packed]] ControlMessage {
    std::uint32_t magic;                 ///< protocol_magic
    std::uint16_t version;               ///< protocol_version of the side that wrote it
    std::uint16_t type;                  ///< a MessageType
    std::uint64_t length;                ///< offer: the file's size in bytes; done: the bytes sent
    std::uint64_t addr;                  ///< ring: the ring's first byte in the receiver's memory
    std::uint32_t rkey;                  ///< ring: the key that lets our WRITEs in
    std::uint32_t chunk;                 ///< ring: bytes per slot
    std::uint32_t slots;                 ///< ring: how many slots
    std::uint32_t flags;                 ///< verdict: 1 when the digests matched
    std::array<std::uint8_t, 32> digest; ///< done, verdict: SHA-256
    char text[max_text];                 ///< offer: the file name; refusal: why; id; key; receipt
};
static_assert(sizeof(ControlMessage) == 456, "the wire format is fixed");

/** @brief A message of @p type with @p text (cut to fit), in this build's version. */
inline ControlMessage make_message(MessageType type, const std::string &text = {})
{
    ControlMessage m{};
    m.magic = htole32(protocol_magic);
    m.version = htole16(protocol_version);
    m.type = htole16(static_cast<std::uint16_t>(type));
    std::memcpy(m.text, text.data(), std::min(text.size(), max_text - 1));
    return m;
}

/** @brief @p m with its numbers swapped between wire order (little-endian) and host order. The
 *  swap is its own inverse, so it serves both ways; magic, version and type stay as they are. */
inline ControlMessage swap_numbers(ControlMessage m)
{
    m.length = le64toh(m.length);
    m.addr = le64toh(m.addr);
    m.rkey = le32toh(m.rkey);
    m.chunk = le32toh(m.chunk);
    m.slots = le32toh(m.slots);
    m.flags = le32toh(m.flags);
    return m;
}

/** @brief The host's view of a message received in @p wire; throws unless it is ours and whole.
 *  @param wire the bytes as received @param byte_len how many arrived (wc.byte_len)
 *  @param from who sent it, for messages @return the message, fields in host order */
inline ControlMessage read_message(const ControlMessage &wire, std::uint32_t byte_len, const std::string &from)
{
    ControlMessage m = swap_numbers(wire);
    m.magic = le32toh(m.magic);
    m.version = le16toh(m.version);
    m.type = le16toh(m.type);
    if (byte_len < 8 || m.magic != protocol_magic)
        throw rdma_samples::Error(from + " sent a message that is not rdma_file_transfer's (" +
                                      std::to_string(byte_len) + " bytes)",
                                  "is the peer rdma_file_sender / rdma_file_receiver, on the same -lp?");
    if (m.version != protocol_version)
        throw rdma_samples::Error(from + " speaks protocol version " + std::to_string(m.version) +
                                      "; this program speaks version " + std::to_string(protocol_version),
                                  "run the same release of rdma_file_sender and rdma_file_receiver on both sides");
    if (byte_len != sizeof(ControlMessage))
        throw rdma_samples::Error(from + " sent a " + std::to_string(byte_len) + "-byte message; version " +
                                      std::to_string(protocol_version) + " messages are " +
                                      std::to_string(sizeof(ControlMessage)),
                                  "the peer is not a matching rdma_file_transfer program");
    if (std::memchr(m.text, '\0', max_text) == nullptr) // text is printed and compared: it must end inside
        throw rdma_samples::Error(from + " sent a " + type_name(m.type) + " whose text has no NUL in its " +
                                      std::to_string(max_text) + " bytes",
                                  "the peer does not follow the protocol");
    return m;
}

/** @brief Throws unless @p m is of @p type; a refusal ends the connection with the peer's reason,
 *  quoted (peer text never reaches a terminal raw). @param m a message from read_message()
 *  @param type what the protocol expects now @param from who sent it @param what the step, for errors */
inline void expect_type(const ControlMessage &m, MessageType type, const std::string &from, const std::string &what)
{
    if (m.type == static_cast<std::uint16_t>(MessageType::refusal)) {
        const std::string text = m.text;
        const std::size_t nl = text.find('\n');
        throw rdma_samples::Error(from + " refused: " + rdma_samples::quote(text.substr(0, nl), 200),
                                  nl == std::string::npos
                                      ? from + "'s output says why"
                                      : from + " says: " + rdma_samples::quote(text.substr(nl + 1), 200));
    }
    if (m.type != static_cast<std::uint16_t>(type))
        throw rdma_samples::Error(from + " sent a " + type_name(m.type) + " message while we waited for " + what,
                                  "the peer does not follow the protocol");
}

/**
 * @brief Test-only fault injection, read once from RDMA_SAMPLES_TEST_FILE_FAULT; never set it in real
 * use. "corrupt": the sender flips one byte of the first chunk after hashing it (the receiver's digest
 * then differs); "version=N": the sender announces protocol version N; "pause=MS": the sender sleeps
 * MS milliseconds after each chunk it posts (so a test can change the file or kill a side midway).
 */
struct TestFault {
    bool corrupt = false;                     ///< flip a byte of the first chunk
    std::uint16_t version = protocol_version; ///< the version to announce
    int pause_ms = 0;                         ///< sleep after each chunk
};

/** @brief The test hook's setting (see TestFault), read at the first call. @return it */
inline const TestFault &test_fault()
{
    static const TestFault fault = [] {
        TestFault f;
        const char *v = rdma_samples::test_control(rdma_samples::TestHook::file_fault);
        const std::string s = v != nullptr ? v : "";
        if (s == "corrupt")
            f.corrupt = true;
        else if (s.rfind("version=", 0) == 0)
            f.version = static_cast<std::uint16_t>(std::atoi(s.c_str() + 8));
        else if (s.rfind("pause=", 0) == 0)
            f.pause_ms = std::atoi(s.c_str() + 6);
        return f;
    }();
    return fault;
}

/// @name The receiver's queues for a ring of @p slots: what check_ring_fits() checks and accept uses
/// @{
/** @brief Receives: one per slot (each WRITE with immediate consumes one), one for a message, one spare. */
inline std::uint32_t receiver_recv_depth(std::uint32_t slots)
{
    return slots + 2;
}
/** @brief SENDs: a credit per slot, and the messages (at most 2 in flight: a verdict or key, a refusal). */
inline std::uint32_t receiver_send_depth(std::uint32_t slots)
{
    return slots + 4;
}
/// @}

/** @brief A ring of @p slots x @p chunk bytes must fit the device: one memory region (max_mr_size),
 *  a receive queue and a send queue of the depths above (max_qp_wr), one CQ for both (max_cqe).
 *  Throws UsageError with the largest --slots that fits. */
inline void check_ring_fits(const ibv_device_attr &attr, const std::string &dev, std::uint32_t slots,
                            std::uint32_t chunk)
{
    const std::string ring = "--slots " + std::to_string(slots);
    if (std::uint64_t{slots} * chunk > attr.max_mr_size)
        throw rdma_samples::UsageError(ring + " --chunk " + std::to_string(chunk) + ": " + dev +
                                           " registers at most max_mr_size = " + std::to_string(attr.max_mr_size) +
                                           " bytes",
                                       "lower --chunk or --slots (see ibv_devinfo -v)");
    const std::uint64_t recv = receiver_recv_depth(slots), send = receiver_send_depth(slots);
    const std::int64_t fit =
        std::min<std::int64_t>(std::int64_t{attr.max_qp_wr} - 4, (std::int64_t{attr.max_cqe} - 6) / 2);
    const std::string hint = "use --slots " + std::to_string(fit) + " or fewer (see ibv_devinfo -v)";
    if (send > static_cast<std::uint64_t>(attr.max_qp_wr))
        throw rdma_samples::UsageError(ring + ": a credit per slot and 4 messages in the send queue exceed " + dev +
                                           "'s max_qp_wr = " + std::to_string(attr.max_qp_wr),
                                       hint);
    if (recv + send > static_cast<std::uint64_t>(attr.max_cqe))
        throw rdma_samples::UsageError(ring + ": " + std::to_string(recv + send) +
                                           " completions (receives and sends) exceed " + dev +
                                           "'s max_cqe = " + std::to_string(attr.max_cqe),
                                       hint);
}

/** @brief librdmacm's own context of @p dev (rdma_get_devices()): every cm_id on that device has it as
 *  id->verbs, so a PD or CQ made on it serves every connection attempt. @param dev the device -d opened
 *  @return the context (librdmacm's, never closed by us) */
inline ibv_context *cm_context(const rdma_samples::Device &dev)
{
    int n = 0;
    ibv_context **list = rdma_samples::check(rdma_get_devices(&n), "rdma_get_devices");
    ibv_context *found = nullptr;
    for (int i = 0; i < n; ++i)
        if (dev.name == ibv_get_device_name(list[i]->device))
            found = list[i];
    rdma_free_devices(list); // the list, not the contexts: librdmacm keeps those
    if (found == nullptr)
        throw rdma_samples::Error("librdmacm does not know " + dev.name,
                                  "check rdma link show: is the device bound to a network interface?");
    return found;
}

/// @name wr_ids: what each completion belongs to
/// @{
inline constexpr std::uint64_t recv_wr_id = 1;           ///< every receive (they complete in the order posted)
inline constexpr std::uint64_t send_wr_id = 2;           ///< every SEND: a message or a credit
inline constexpr std::uint64_t write_wr_id = 1ULL << 32; ///< sender's WRITE with immediate into slot s: write_wr_id + s
/// @}

/** @brief The QP librdmacm made on a cm_id (rdma_create_qp()); rdma_destroy_qp() when it goes. */
struct CmQp {
    rdma_cm_id *id = nullptr; ///< the cm_id that owns the QP (id->qp)
    CmQp() = default;
    CmQp(const CmQp &) = delete;
    CmQp &operator=(const CmQp &) = delete;
    ~CmQp() { reset(nullptr); }
    /** @brief Destroy the QP held so far (if any), then hold @p owner's. @param owner a cm_id with a QP, or nullptr */
    void reset(rdma_cm_id *owner)
    {
        if (id != nullptr)
            rdma_destroy_qp(id);
        id = owner;
    }
};

/** @brief Post @p n receives (wr_id recv_wr_id), all into the one message buffer @p msg: the protocol
 *  has at most one message in flight each way, and credits carry no bytes. */
inline void post_receives(ibv_qp *qp, std::uint32_t n, ControlMessage *msg, std::uint32_t lkey)
{
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(msg), sizeof *msg, lkey};
    for (std::uint32_t i = 0; i < n; ++i) {
        ibv_recv_wr wr{};
        wr.wr_id = recv_wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        rdma_samples::check_rc(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
    }
}

/** @brief SEND: @p msg (put in wire order into @p buf, registered with @p lkey), or, with @p buf
 *  nullptr, a zero-length SEND whose immediate value @p imm is the whole message (a credit, "done"). */
inline void post_send(ibv_qp *qp, ControlMessage *buf, std::uint32_t lkey, const ControlMessage &msg,
                      std::uint32_t imm = 0)
{
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), sizeof *buf, lkey};
    ibv_send_wr wr{};
    wr.wr_id = send_wr_id;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (buf != nullptr) {
        *buf = swap_numbers(msg);
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &sge;
        wr.num_sge = 1;
    } else {
        wr.opcode = IBV_WR_SEND_WITH_IMM; // no bytes: the immediate value says it all
        wr.imm_data = htobe32(imm);       // immediate data travels in network byte order
    }
    ibv_send_wr *bad = nullptr;
    rdma_samples::check_rc(ibv_post_send(qp, &wr, &bad), "ibv_post_send(SEND)");
}

} // namespace file_transfer
