/**
 * @file test_file_transfer_checks.cpp
 * @brief rdma_file_transfer's checks of what a peer sends (rdma_file_transfer/peer_checks.hpp), without a
 * device: each message field, chunk, ring, credit, answer and verdict that can lie, at the edge of each
 * bound and one past it; and the sender's name as a file name (support/destination.hpp) and the answer to
 * its ID (support/keys.hpp). tests/bats/rdma_file_transfer_rogue.bats tells the same lies over a real
 * connection.
 */
#include "rdma_file_transfer/peer_checks.hpp"
#include "rdma_file_transfer/support/destination.hpp"
#include "rdma_file_transfer/support/keys.hpp"

#include <rdma_samples/check.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace rdma_file_transfer;
using rdma_samples::Error;

namespace {

/** What a check threw: its message and hint, or "(nothing thrown)", so that EXPECT_EQ shows both. */
struct Thrown {
    std::string what, hint;
};

template <typename Check>
Thrown thrown(Check check)
{
    try {
        check();
    } catch (const Error &e) {
        return {e.what(), e.hint()};
    }
    return {"(nothing thrown)", ""};
}

/** @p m as the peer puts it on the wire: make_message() sets magic, version and type in wire order,
 *  swap_numbers() the rest. */
ControlMessage on_wire(const ControlMessage &m)
{
    return swap_numbers(m);
}

/** read_message() of a whole message, as the receiver reads the sender's. */
ControlMessage read_whole(const ControlMessage &wire)
{
    return read_message(wire, sizeof(ControlMessage), "the sender");
}

Thrown read_error(const ControlMessage &wire, std::uint32_t byte_len = sizeof(ControlMessage))
{
    return thrown([&] { read_message(wire, byte_len, "the sender"); });
}

/** A message whose version field is @p version as the wire says it (little-endian). */
ControlMessage with_version(std::uint16_t version, MessageType type = MessageType::offer)
{
    ControlMessage m = make_message(type, "f");
    m.version = htole16(version);
    return on_wire(m);
}

constexpr const char *not_ours_hint = "is the peer rdma_file_sender / rdma_file_receiver, on the same -lp?";

/** A chunk's completion: a WRITE with immediate of @p byte_len bytes naming @p slot, in network order. */
ibv_wc chunk_wc(std::uint32_t slot, std::uint32_t byte_len, ibv_wc_opcode opcode = IBV_WC_RECV_RDMA_WITH_IMM)
{
    ibv_wc wc{};
    wc.opcode = opcode;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = htobe32(slot);
    wc.byte_len = byte_len;
    return wc;
}

constexpr std::uint32_t slots = 4, chunk = 4096;
constexpr std::uint64_t length = 10000; // two full chunks and one of 1808 bytes

Thrown chunk_error(const ibv_wc &wc, std::uint64_t received, std::uint64_t offered = length)
{
    return thrown([&] { check_chunk(wc, slots, chunk, received, offered); });
}

ControlMessage ring(std::uint64_t addr, std::uint32_t ring_slots, std::uint32_t ring_chunk)
{
    ControlMessage m = make_message(MessageType::ring);
    m.addr = addr;
    m.rkey = 0x1234;
    m.slots = ring_slots;
    m.chunk = ring_chunk;
    return m;
}

/** bad_ring()'s reason as a Thrown (what, hint), or "(nothing thrown)" when the ring is accepted. */
Thrown ring_error(const ControlMessage &m)
{
    const std::optional<Error> why = bad_ring(m);
    if (!why)
        return {"(nothing thrown)", ""};
    return {why->what(), why->hint()};
}

constexpr const char *ring_hint = "the receiver does not follow the protocol, or its --slots/--chunk are too big";

/** A refusal, as read_message() returns it. */
ControlMessage refusal(const std::string &text)
{
    return read_whole(on_wire(make_message(MessageType::refusal, text)));
}

/** One of the sender's slots, as check_answer() sees it. */
struct Held {
    bool credited;
};

Digest counting_digest()
{
    Digest d{};
    for (std::size_t i = 0; i < d.size(); ++i)
        d[i] = static_cast<std::uint8_t>(i);
    return d;
}

ControlMessage verdict(std::uint32_t flags, const Digest &digest)
{
    ControlMessage m = make_message(MessageType::verdict);
    m.flags = flags;
    m.digest = digest;
    return m;
}

} // namespace

// --- read_message(): magic, version, size, text ---

TEST(FileTransferMessage, WireBytesAreReadLittleEndianIntoHostOrder)
{
    // Built byte by byte, as another machine would send it: "TFDR" is protocol_magic in little-endian.
    unsigned char bytes[sizeof(ControlMessage)] = {};
    const unsigned char head[] = {0x54, 0x46, 0x44, 0x52, 2, 0, 8, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    std::memcpy(bytes, head, sizeof head);
    std::memcpy(bytes + offsetof(ControlMessage, slots), "\x04\x00\x00\x00", 4);
    std::memcpy(bytes + offsetof(ControlMessage, text), "report.pdf", 11);
    ControlMessage wire;
    std::memcpy(&wire, bytes, sizeof wire);
    const ControlMessage m = read_whole(wire);
    EXPECT_EQ(m.magic, protocol_magic);
    EXPECT_EQ(m.version, protocol_version);
    EXPECT_EQ(m.type, static_cast<std::uint16_t>(MessageType::done));
    EXPECT_EQ(m.length, 0x0102030405060708ULL);
    EXPECT_EQ(m.slots, 4U);
    EXPECT_STREQ(m.text, "report.pdf");
}

TEST(FileTransferMessage, TextMayFillEveryByteButItsNul)
{
    const std::string longest(max_text - 1, 'x'); // 383 bytes, the NUL in the last one
    EXPECT_EQ(std::strlen(read_whole(on_wire(make_message(MessageType::offer, longest))).text), max_text - 1);
    EXPECT_STREQ(read_whole(on_wire(make_message(MessageType::id))).text, ""); // NUL in the first byte
}

TEST(FileTransferMessage, FewerThanEightBytesAreNotOurs)
{
    // Magic and version sit in the first 8 bytes: fewer cannot carry them, whatever the buffer still holds.
    const ControlMessage good = on_wire(make_message(MessageType::offer, "f"));
    for (std::uint32_t byte_len : {0U, 4U, 7U}) {
        const Thrown e = read_error(good, byte_len);
        EXPECT_EQ(e.what, "the sender sent a message that is not rdma_file_transfer's (" + std::to_string(byte_len) +
                              " bytes)");
        EXPECT_EQ(e.hint, not_ours_hint);
    }
}

TEST(FileTransferMessage, AnotherMagicIsNotOurs)
{
    const ControlMessage good = on_wire(make_message(MessageType::offer, "f"));
    ControlMessage big_endian = good; // "RDFT" in the wrong byte order
    big_endian.magic = htobe32(protocol_magic);
    ControlMessage zero = good;
    zero.magic = 0;
    ControlMessage one_bit = good;
    one_bit.magic = htole32(protocol_magic ^ 1);
    for (const ControlMessage &wire : {big_endian, zero, one_bit}) {
        const Thrown e = read_error(wire);
        EXPECT_EQ(e.what, "the sender sent a message that is not rdma_file_transfer's (456 bytes)");
        EXPECT_EQ(e.hint, not_ours_hint);
    }
}

TEST(FileTransferMessage, AnotherVersionIsNamedEvenWhenItsSizeDiffers)
{
    // Magic and version keep their place in every version: a peer of another one hears why, whatever
    // the size its messages have.
    const Thrown v1 = read_error(with_version(1));
    EXPECT_EQ(v1.what, "the sender speaks protocol version 1; this program speaks version 2");
    EXPECT_EQ(v1.hint, "run the same release of rdma_file_sender and rdma_file_receiver on both sides");
    EXPECT_EQ(read_error(with_version(3), 100).what,
              "the sender speaks protocol version 3; this program speaks version 2");
    EXPECT_EQ(read_error(with_version(0xffff), 8).what,
              "the sender speaks protocol version 65535; this program speaks version 2");
    EXPECT_EQ(read_error(with_version(0)).what, "the sender speaks protocol version 0; this program speaks version 2");
    // Version 2 written big-endian reads as 512: the field is little-endian on the wire.
    ControlMessage swapped = on_wire(make_message(MessageType::offer, "f"));
    swapped.version = htobe16(protocol_version);
    EXPECT_EQ(read_error(swapped).what, "the sender speaks protocol version 512; this program speaks version 2");
}

TEST(FileTransferMessage, AnySizeButTheMessagesIsRejectedWithIt)
{
    const ControlMessage good = on_wire(make_message(MessageType::offer, "f"));
    for (std::uint32_t byte_len : {8U, 455U, 457U, 4096U, UINT32_MAX}) {
        const Thrown e = read_error(good, byte_len);
        EXPECT_EQ(e.what,
                  "the sender sent a " + std::to_string(byte_len) + "-byte message; version 2 messages are 456");
        EXPECT_EQ(e.hint, "the peer is not a matching rdma_file_transfer program");
    }
}

TEST(FileTransferMessage, TextWithoutNulIsRejected)
{
    ControlMessage offer = make_message(MessageType::offer);
    std::memset(offer.text, 'A', max_text);
    const Thrown e = read_error(on_wire(offer));
    EXPECT_EQ(e.what, "the sender sent a offer whose text has no NUL in its 384 bytes");
    EXPECT_EQ(e.hint, "the peer does not follow the protocol");
    ControlMessage unknown = offer; // the type is named even when it is not one of ours
    unknown.type = htole16(99);
    EXPECT_EQ(read_error(on_wire(unknown)).what,
              "the sender sent a unknown type 99 whose text has no NUL in its 384 bytes");
}

// --- expect_type(): the type in turn, and a refusal's reason ---

TEST(FileTransferMessage, TheTypeInTurnPasses)
{
    const ControlMessage m = read_whole(on_wire(make_message(MessageType::ring)));
    EXPECT_NO_THROW(expect_type(m, MessageType::ring, "the receiver", "the receiver's ring"));
}

TEST(FileTransferMessage, AnotherTypeIsNamedWithWhatWeWaitedFor)
{
    const auto error = [](std::uint16_t type) {
        ControlMessage m = make_message(MessageType::offer);
        m.type = htole16(type);
        const ControlMessage read = read_whole(on_wire(m));
        return thrown([&] { expect_type(read, MessageType::offer, "the sender", "the offer"); });
    };
    const Thrown a_ring = error(2);
    EXPECT_EQ(a_ring.what, "the sender sent a ring message while we waited for the offer");
    EXPECT_EQ(a_ring.hint, "the peer does not follow the protocol");
    EXPECT_EQ(error(0).what, "the sender sent a unknown type 0 message while we waited for the offer");
    EXPECT_EQ(error(9).what, "the sender sent a unknown type 9 message while we waited for the offer");
    EXPECT_EQ(error(0xffff).what, "the sender sent a unknown type 65535 message while we waited for the offer");
}

TEST(FileTransferMessage, ARefusalEndsWithItsReasonAndAdviceQuoted)
{
    const auto error = [](const std::string &text, MessageType expected = MessageType::ring) {
        const ControlMessage m = refusal(text);
        return thrown([&] { expect_type(m, expected, "the receiver", "the ring"); });
    };
    const Thrown full = error("disk full\nfree 2 GiB on /srv");
    EXPECT_EQ(full.what, R"(the receiver refused: "disk full")");
    EXPECT_EQ(full.hint, R"(the receiver says: "free 2 GiB on /srv")");
    EXPECT_EQ(error("no").hint, "the receiver's output says why"); // no second line
    EXPECT_EQ(error("a\nb\nc").hint, R"(the receiver says: "b\nc")");
    // Even while a refusal is what we wait for, it throws: it ends the connection.
    EXPECT_EQ(error("stop", MessageType::refusal).what, R"(the receiver refused: "stop")");
}

TEST(FileTransferMessage, ARefusalsControlBytesReachNoTerminalRaw)
{
    const ControlMessage m = refusal("\x1b]0;owned\x07\x1b[2J\nrm -rf \x1b[1m~");
    const Thrown e = thrown([&] { expect_type(m, MessageType::verdict, "the receiver", "the verdict"); });
    EXPECT_EQ(e.what, R"(the receiver refused: "\x1b]0;owned\x07\x1b[2J")");
    EXPECT_EQ(e.hint, R"(the receiver says: "rm -rf \x1b[1m~")");
    EXPECT_EQ(e.what.find('\x1b'), std::string::npos);
    EXPECT_EQ(e.hint.find('\x1b'), std::string::npos);
    // 383 bytes of reason: the first 200 shown, then the size.
    const Thrown longest = thrown([&] {
        expect_type(refusal(std::string(max_text - 1, 'r')), MessageType::verdict, "the receiver", "the verdict");
    });
    EXPECT_EQ(longest.what, "the receiver refused: \"" + std::string(200, 'r') + "...\" (383 bytes)");
}

// --- check_is_message(): a message, not a chunk, where a message is due ---

TEST(FileTransferChunk, OnlyAPlainReceiveIsAMessage)
{
    ibv_wc message{};
    message.opcode = IBV_WC_RECV;
    EXPECT_NO_THROW(check_is_message(message, "the offer"));
    const Thrown write = thrown([&] { check_is_message(chunk_wc(0, chunk), "the offer"); });
    EXPECT_EQ(write.what, "the sender sent a WRITE with immediate while we waited for the offer");
    EXPECT_EQ(write.hint, "the sender does not follow the protocol");
    EXPECT_EQ(thrown([&] { check_is_message(chunk_wc(0, 0, IBV_WC_RECV), "the offer"); }).what,
              "the sender sent a SEND with immediate while we waited for the offer");
}

// --- check_chunk(): slot, length, and nothing after the offered length ---

TEST(FileTransferChunk, FullChunksIntoTheFirstAndLastSlotPass)
{
    // The immediate is in network byte order: read in host order, slot 3 would be 0x03000000.
    EXPECT_EQ(check_chunk(chunk_wc(0, chunk), slots, chunk, 0, length), 0U);
    EXPECT_EQ(check_chunk(chunk_wc(3, chunk), slots, chunk, chunk, length), 3U);
}

TEST(FileTransferChunk, TheLastChunkIsWhatTheOfferLeaves)
{
    EXPECT_EQ(check_chunk(chunk_wc(2, 1808), slots, chunk, 2 * chunk, length), 2U);
    EXPECT_EQ(check_chunk(chunk_wc(1, chunk), slots, chunk, chunk, 2 * chunk), 1U); // ends on a whole chunk
    EXPECT_EQ(check_chunk(chunk_wc(1, 1), slots, chunk, UINT64_MAX - 1, UINT64_MAX), 1U);
}

TEST(FileTransferChunk, ASlotOutsideTheRingIsRejected)
{
    const Thrown four = chunk_error(chunk_wc(4, chunk), 0);
    EXPECT_EQ(four.what,
              "a WRITE of 4096 bytes into slot 4 after 0 of 10000 bytes; expected 4096 bytes into one of 4 slots");
    EXPECT_EQ(four.hint, "the sender does not follow the protocol");
    EXPECT_EQ(chunk_error(chunk_wc(UINT32_MAX, chunk), 0).what,
              "a WRITE of 4096 bytes into slot 4294967295 after 0 of 10000 bytes; expected 4096 bytes into one of 4 "
              "slots");
}

TEST(FileTransferChunk, AChunkOfAnyOtherLengthIsRejected)
{
    EXPECT_EQ(chunk_error(chunk_wc(0, chunk - 1), 0).what,
              "a WRITE of 4095 bytes into slot 0 after 0 of 10000 bytes; expected 4096 bytes into one of 4 slots");
    EXPECT_EQ(chunk_error(chunk_wc(0, chunk + 1), 0).what,
              "a WRITE of 4097 bytes into slot 0 after 0 of 10000 bytes; expected 4096 bytes into one of 4 slots");
    EXPECT_EQ(chunk_error(chunk_wc(0, 0), 0).what,
              "a WRITE of 0 bytes into slot 0 after 0 of 10000 bytes; expected 4096 bytes into one of 4 slots");
    EXPECT_EQ(chunk_error(chunk_wc(2, 1807), 2 * chunk).what,
              "a WRITE of 1807 bytes into slot 2 after 8192 of 10000 bytes; expected 1808 bytes into one of 4 slots");
    EXPECT_EQ(chunk_error(chunk_wc(2, chunk), 2 * chunk).what, // a full chunk where the offer leaves 1808
              "a WRITE of 4096 bytes into slot 2 after 8192 of 10000 bytes; expected 1808 bytes into one of 4 slots");
    EXPECT_EQ(chunk_error(chunk_wc(0, UINT32_MAX), 0).what,
              "a WRITE of 4294967295 bytes into slot 0 after 0 of 10000 bytes; expected 4096 bytes into one of 4 "
              "slots");
}

TEST(FileTransferChunk, NoChunkAfterTheOfferedLengthNotEvenAnEmptyOne)
{
    EXPECT_EQ(chunk_error(chunk_wc(0, 0), length).what,
              "a WRITE of 0 bytes into slot 0 after 10000 of 10000 bytes; expected 0 bytes into one of 4 slots (no "
              "more chunks)");
    EXPECT_EQ(chunk_error(chunk_wc(0, chunk), length).what,
              "a WRITE of 4096 bytes into slot 0 after 10000 of 10000 bytes; expected 0 bytes into one of 4 slots (no "
              "more chunks)");
    EXPECT_EQ(chunk_error(chunk_wc(0, 0), 0, 0).what, // an empty file takes no chunk at all
              "a WRITE of 0 bytes into slot 0 after 0 of 0 bytes; expected 0 bytes into one of 4 slots (no more "
              "chunks)");
}

TEST(FileTransferChunk, ASendWithImmediateIsNotAChunk)
{
    const Thrown e = chunk_error(chunk_wc(42, 0, IBV_WC_RECV), 0);
    EXPECT_EQ(e.what, "the sender sent a SEND with immediate 0x2a; it sends chunks and messages only");
    EXPECT_EQ(e.hint, "the sender does not follow the protocol");
}

// --- check_done(): "done" after exactly the offered length ---

TEST(FileTransferChunk, DoneComesAfterExactlyTheOfferedLength)
{
    ControlMessage done = make_message(MessageType::done);
    done.length = length;
    EXPECT_NO_THROW(check_done(done, length, length));
    done.length = 0;
    EXPECT_NO_THROW(check_done(done, 0, 0)); // an empty file
    done.length = length + 1;
    const Thrown says_more = thrown([&] { check_done(done, length, length); });
    EXPECT_EQ(says_more.what, "\"done\" after 10000 bytes (it says 10001); the offer said 10000");
    EXPECT_EQ(says_more.hint, "the sender does not follow the protocol, or its file changed");
    done.length = length;
    EXPECT_EQ(thrown([&] { check_done(done, 2 * chunk, length); }).what,
              "\"done\" after 8192 bytes (it says 10000); the offer said 10000"); // early
    done.length = UINT64_MAX;
    EXPECT_EQ(thrown([&] { check_done(done, length, length); }).what,
              "\"done\" after 10000 bytes (it says 18446744073709551615); the offer said 10000");
}

// --- bad_ring(): the receiver's ring, before the sender allocates anything from it ---

TEST(FileTransferRing, RingsUpToTheLimitsAreAccepted)
{
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1, 1)).what, "(nothing thrown)");
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1, max_chunk)).what, "(nothing thrown)");
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1024, 1 << 20)).what, "(nothing thrown)"); // max_ring_bytes exactly
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1 << 30, 1)).what, "(nothing thrown)");
    EXPECT_EQ(ring_error(ring(0, 4, 4096)).what, "(nothing thrown)");
    EXPECT_EQ(ring_error(ring(UINT64_MAX - 4 * 4096, 4, 4096)).what, "(nothing thrown)"); // last byte 2^64 - 2
}

TEST(FileTransferRing, AnEmptyRingIsRejected)
{
    const Thrown no_slots = ring_error(ring(0x7f0000000000, 0, 4096));
    EXPECT_EQ(no_slots.what, "the receiver offers a ring of 0 slots of 4096 bytes");
    EXPECT_EQ(no_slots.hint, ring_hint);
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 4, 0)).what, "the receiver offers a ring of 4 slots of 0 bytes");
    EXPECT_EQ(ring_error(ring(0, 0, 0)).what, "the receiver offers a ring of 0 slots of 0 bytes");
}

TEST(FileTransferRing, AChunkOrRingPastTheLimitIsRejected)
{
    const auto too_big = [](const std::string &geometry) {
        return "the receiver offers a ring of " + geometry +
               " bytes; we accept chunks of at most 1073741824 and rings of at most 1073741824 bytes";
    };
    const Thrown chunk_past = ring_error(ring(0x7f0000000000, 1, max_chunk + 1));
    EXPECT_EQ(chunk_past.what, too_big("1 x 1073741825"));
    EXPECT_EQ(chunk_past.hint, ring_hint);
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1025, 1 << 20)).what, too_big("1025 x 1048576"));
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 2, max_chunk)).what, too_big("2 x 1073741824")); // each chunk fits
    EXPECT_EQ(ring_error(ring(0x7f0000000000, (1U << 30) + 1, 1)).what, too_big("1073741825 x 1"));
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1024, 1U << 30)).what, too_big("1024 x 1073741824")); // 2^40
    EXPECT_EQ(ring_error(ring(0x7f0000000000, UINT32_MAX, 1)).what, too_big("4294967295 x 1"));
    // slots x chunk is taken in 64 bits: 2^32 bytes would be 0 in 32 bits, (2^32 - 1)^2 would be 1.
    EXPECT_EQ(ring_error(ring(0x7f0000000000, 1U << 22, 1U << 10)).what, too_big("4194304 x 1024"));
    EXPECT_EQ(ring_error(ring(0x7f0000000000, UINT32_MAX, UINT32_MAX)).what, too_big("4294967295 x 4294967295"));
}

TEST(FileTransferRing, ARingThatWrapsAroundTheAddressSpaceIsRejected)
{
    const Thrown top = ring_error(ring(UINT64_MAX - 4 * 4096 + 1, 4, 4096)); // one past the last accepted
    EXPECT_EQ(top.what, "the receiver offers a ring at addr 0xffffffffffffc000 that wraps around the address space");
    EXPECT_EQ(top.hint, ring_hint);
    EXPECT_EQ(ring_error(ring(UINT64_MAX, 1, 1)).what,
              "the receiver offers a ring at addr 0xffffffffffffffff that wraps around the address space");
    EXPECT_EQ(ring_error(ring(UINT64_MAX - 100, 1024, 1 << 20)).what,
              "the receiver offers a ring at addr 0xffffffffffffff9b that wraps around the address space");
}

// --- check_credit(), check_answer(), check_verdict(): what the receiver sends back ---

TEST(FileTransferReceiver, ACreditIsEmptyAndReturnsASlotTheReceiverHolds)
{
    EXPECT_NO_THROW(check_credit(0, 3, true));
    const Thrown with_bytes = thrown([] { check_credit(1, 3, true); });
    EXPECT_EQ(with_bytes.what, "the receiver returned slot 3 (1 bytes), which is not one we wrote and it still holds");
    EXPECT_EQ(with_bytes.hint, "the receiver does not follow the protocol");
    EXPECT_EQ(thrown([] { check_credit(0, 99, false); }).what,
              "the receiver returned slot 99 (0 bytes), which is not one we wrote and it still holds");
}

TEST(FileTransferReceiver, AnAnswerPassesOnTheReceiversTurnWithEverySlotBack)
{
    const ControlMessage m = read_whole(on_wire(make_message(MessageType::verdict)));
    EXPECT_NO_THROW(check_answer(m, Turn::receiver, std::vector<Held>{{true}, {true}}, "the verdict"));
    EXPECT_NO_THROW(check_answer(m, Turn::receiver, std::vector<Held>{}, "the ring")); // before any slot
}

TEST(FileTransferReceiver, AnAnswerOnTheSendersTurnIsRejected)
{
    const ControlMessage m = read_whole(on_wire(make_message(MessageType::verdict)));
    const Thrown e = thrown([&] { check_answer(m, Turn::sender, std::vector<Held>{{true}}, "the credit of slot 0"); });
    EXPECT_EQ(e.what, "the receiver sent a verdict message while we waited for the credit of slot 0; it owed us no "
                      "message then");
    EXPECT_EQ(e.hint, "the receiver does not follow the protocol");
}

TEST(FileTransferReceiver, AnAnswerWhileTheReceiverHoldsASlotCameTooEarly)
{
    const ControlMessage m = read_whole(on_wire(make_message(MessageType::verdict)));
    EXPECT_EQ(thrown([&] {
                  check_answer(m, Turn::receiver, std::vector<Held>{{true}, {false}, {true}}, "the verdict");
              }).what,
              "the receiver sent a verdict message while it still held slot 1: it answered before it had all the data");
    EXPECT_EQ(thrown([&] {
                  check_answer(m, Turn::receiver, std::vector<Held>{{true}, {true}, {false}}, "the verdict");
              }).what,
              "the receiver sent a verdict message while it still held slot 2: it answered before it had all the data");
}

TEST(FileTransferReceiver, ARefusalEndsWithItsReasonWhenever)
{
    // The sender's turn, a slot still held: the refusal's own reason wins, quoted.
    const Thrown e =
        thrown([] { check_answer(refusal("disk full"), Turn::sender, std::vector<Held>{{false}}, "the verdict"); });
    EXPECT_EQ(e.what, R"(the receiver refused: "disk full")");
}

TEST(FileTransferReceiver, AVerdictOfAMatchCarriesOurDigest)
{
    const Digest ours = counting_digest();
    EXPECT_NO_THROW(check_verdict(verdict(1, ours), ours));
}

TEST(FileTransferReceiver, AVerdictOfAMatchWithAnotherDigestIsNotTrusted)
{
    const Digest ours = counting_digest();
    Digest theirs = ours;
    theirs[31] ^= 1;
    const Thrown e = thrown([&] { check_verdict(verdict(1, theirs), ours); });
    EXPECT_EQ(e.what, "the receiver says the digests match, but it computed "
                      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1e, not our "
                      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f: not trusted");
    EXPECT_EQ(e.hint, "the receiver does not follow the protocol; do not rely on its copy");
}

TEST(FileTransferReceiver, AVerdictOfAMismatchWithOurDigestContradictsItself)
{
    const Digest ours = counting_digest();
    const Thrown e = thrown([&] { check_verdict(verdict(0, ours), ours); });
    EXPECT_EQ(e.what, "the receiver computed our digest "
                      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f, yet says they differ");
    EXPECT_EQ(e.hint, "the receiver does not follow the protocol");
}

TEST(FileTransferReceiver, AnHonestMismatchSaysTheDataWasDamaged)
{
    const Digest ours = counting_digest();
    const Digest theirs{};
    const Thrown e = thrown([&] { check_verdict(verdict(0, theirs), ours); });
    EXPECT_EQ(e.what, "the receiver computed " + std::string(64, '0') +
                          ", not 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f: the data was "
                          "damaged");
    EXPECT_EQ(e.hint, "nothing was kept on the receiver; send the file again");
}

// --- bad_name(), answer_id(): the sender's name as a file name, and the answer to its ID ---

TEST(FileTransferReceiver, ANameFromTheSenderIsAFileNameOrItSaysWhyNot)
{
    EXPECT_EQ(bad_name("notes.txt"), std::nullopt);
    EXPECT_EQ(bad_name(std::string(max_name, 'x')), std::nullopt);
    EXPECT_EQ(bad_name(""), "is empty");
    EXPECT_EQ(bad_name(".profile"), "starts with . (hidden files and names that read as flags are refused)");
    EXPECT_EQ(bad_name("-rf"), "starts with - (hidden files and names that read as flags are refused)");
    EXPECT_EQ(bad_name("a/b"), "contains /");
    EXPECT_EQ(bad_name("a\nb"), "contains a control character");
    EXPECT_EQ(bad_name("a\x7f"), "contains a control character");
    EXPECT_EQ(bad_name(std::string(max_name + 1, 'x')),
              "is 239 bytes; at most 238 fit (NAME_MAX 255, less 17 for the temporary name)");
}

TEST(FileTransferReceiver, ANameIsUtf8WithoutC1ControlsOrInvisibleFormatCharacters)
{
    EXPECT_EQ(bad_name("r\xc3\xa9sum\xc3\xa9.pdf"), std::nullopt);     // résumé.pdf
    EXPECT_EQ(bad_name("\xe6\x97\xa5\xe8\xa8\x98.txt"), std::nullopt); // 日記.txt
    EXPECT_EQ(bad_name("\xf0\x9f\x93\x84"), std::nullopt);             // U+1F4C4, four bytes
    EXPECT_EQ(bad_name("a\xc2\x9b"
                       "31m"),
              "contains a control character");                         // U+009B, C1's CSI
    EXPECT_EQ(bad_name("a\x9b"), "is not UTF-8 (byte 1)");             // the same C1 byte alone
    EXPECT_EQ(bad_name("ab\xc3"), "is not UTF-8 (byte 2)");            // cut short
    EXPECT_EQ(bad_name("a\xc0\xaf"), "is not UTF-8 (byte 1)");         // an overlong "/"
    EXPECT_EQ(bad_name("a\xe0\x80\xaf"), "is not UTF-8 (byte 1)");     // an overlong "/" in three bytes
    EXPECT_EQ(bad_name("a\xed\xa0\x80"), "is not UTF-8 (byte 1)");     // a surrogate
    EXPECT_EQ(bad_name("a\xf4\x90\x80\x80"), "is not UTF-8 (byte 1)"); // beyond U+10FFFF
    const std::string why = ": bidirectional controls and zero-width characters hide what the name says)";
    EXPECT_EQ(bad_name("invoice\xe2\x80\xaetxt.exe"), "contains an invisible format character (U+202E" + why);
    EXPECT_EQ(bad_name("a\xe2\x80\x8b"), "contains an invisible format character (U+200B" + why);
    EXPECT_EQ(bad_name("a\xe2\x81\xa6"), "contains an invisible format character (U+2066" + why);
    EXPECT_EQ(bad_name("a\xef\xbb\xbf"), "contains an invisible format character (U+FEFF" + why);
    EXPECT_EQ(bad_name("a\xc2\xad"), "contains an invisible format character (U+00AD" + why);
}

TEST(FileTransferReceiver, TheDestinationIsADirectoryAndAName)
{
    EXPECT_EQ(destination("out.bin", "x").dir, ".");
    EXPECT_EQ(destination("out.bin", "x").path(), "out.bin");
    EXPECT_EQ(destination("/nonexistent-dir/out.bin", "x").dir, "/nonexistent-dir");
    EXPECT_EQ(destination("/", "notes.txt").path(), "/notes.txt");
    EXPECT_EQ(destination("/tmp", "notes.txt").name, "notes.txt");
    EXPECT_THROW(destination("/nonexistent-dir/", "x"), Error); // ends with / but is no directory
    EXPECT_EQ(shown_path("/tmp/notes.txt"), "/tmp/notes.txt");
    EXPECT_EQ(shown_path("/tmp/r\xc3\xa9sum\xc3\xa9"), "\"/tmp/r\\xc3\\xa9sum\\xc3\\xa9\"");
}

TEST(FileTransferReceiver, AnIdGetsItsKeyARefusalOrWithoutKeysAReceipt)
{
    const Digest digest = counting_digest();
    const ControlMessage receipt = answer_id(std::nullopt, "alice", 5, digest);
    EXPECT_EQ(receipt.type, static_cast<std::uint16_t>(MessageType::receipt));
    EXPECT_EQ(std::string(receipt.text), "received 5 bytes, sha256 " + hex(digest) + ", for alice");
    EXPECT_STREQ(answer_name(receipt), "a receipt");
    const Keys keys{{"alice", "s3cret"}};
    const ControlMessage key = answer_id(keys, "alice", 5, digest);
    EXPECT_EQ(std::string(key.text), "s3cret");
    EXPECT_STREQ(answer_name(key), "its key");
    EXPECT_STREQ(answer_name(answer_id(keys, "mallory", 5, digest)), "a refusal (unknown ID)");
    EXPECT_STREQ(answer_name(answer_id(Keys{}, "alice", 5, digest)), "a refusal (unknown ID)"); // --keys, no line
}

namespace {
/** load_keys()'s error for @p path, or "(no error)". */
std::string keys_error(const std::string &path)
{
    try {
        load_keys(path);
    } catch (const Error &e) {
        return e.what();
    }
    return "(no error)";
}
/** A file holding @p text in the test's temporary directory. @return its path */
std::string keys_file(const std::string &name, const std::string &text)
{
    const auto path = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::ofstream(path) << text;
    return path.string();
}
} // namespace

TEST(FileTransferReceiver, AKeysFileIsASmallRegularFileWithAtLeastOneKey)
{
    const std::string good = keys_file("keys-good", "# id key\n\nalice s3cret a\n");
    EXPECT_EQ(load_keys(good)->at("alice"), "s3cret a");
    const std::string empty = keys_file("keys-empty", ""), comments = keys_file("keys-comments", "# none yet\n\n");
    EXPECT_EQ(keys_error(empty), empty + ": no key in it (only blank lines and # comments)");
    EXPECT_EQ(keys_error(comments), comments + ": no key in it (only blank lines and # comments)");
    const std::string long_key = keys_file("keys-long", "bob " + std::string(max_text, 'k') + "\n");
    EXPECT_EQ(keys_error(long_key), long_key + ":1: the key is 384 bytes; at most 383 fit in a message");
    const std::string bad = keys_file("keys-bad", "alice\n");
    EXPECT_EQ(keys_error(bad), bad + ":1: expected \"ID KEY\", got \"alice\"");
    // Whatever sits at the path, the answer comes at once: nothing blocks (a FIFO), nothing grows (/dev/zero).
    const auto fifo = std::filesystem::temp_directory_path() / ("keys-fifo-" + std::to_string(::getpid()));
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(keys_error(fifo.string()),
              fifo.string() + ": is a FIFO, not a regular file; a --keys file is a small text file");
    EXPECT_EQ(keys_error("/dev/zero"),
              "/dev/zero: is a device or special file, not a regular file; a --keys file is a small text file");
    EXPECT_EQ(keys_error("/"), "/: is a directory, not a --keys file");
    EXPECT_EQ(keys_error("/nonexistent/keys"), "open(\"/nonexistent/keys\"): No such file or directory (errno 2)");
    for (const std::string &p : {good, empty, comments, long_key, bad, fifo.string()})
        std::filesystem::remove(p);
}
