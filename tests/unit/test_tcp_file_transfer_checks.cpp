/**
 * @file test_tcp_file_transfer_checks.cpp
 * @brief The TCP twin's checks of what a peer sends (rdma_file_transfer/tcp/protocol.hpp), and its flags
 * (tcp/options.hpp: no RDMA flag at all), without a socket. tests/bats/tcp_file_transfer.bats tells the
 * same lies over a real connection.
 */
#include "rdma_file_transfer/tcp/options.hpp"
#include "rdma_file_transfer/tcp/protocol.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace rdma_file_transfer::tcp;
using rdma_file_transfer::Digest;
using rdma_samples::Error;

namespace {

/** What check_message() threw, or "(nothing thrown)". */
std::string message_error(const Message &m, Type type = Type::offer)
{
    try {
        check_message(m, type, "the sender", "the offer");
    } catch (const Error &e) {
        return e.what();
    }
    return "(nothing thrown)";
}

std::string verdict_error(const Message &verdict, const Digest &ours)
{
    try {
        check_tcp_verdict(verdict, ours);
    } catch (const Error &e) {
        return e.what();
    }
    return "(nothing thrown)";
}

rdma_samples::Args parse(const rdma_samples::ProgramSpec &spec, std::vector<const char *> words)
{
    words.insert(words.begin(), "prog");
    return rdma_samples::parse_args(spec, static_cast<int>(words.size()), words.data());
}

} // namespace

TEST(TcpFileTransfer, MessagesSurviveTheWireAndAreCheckedFieldByField)
{
    Message offer = make_message(Type::offer, "f.txt");
    offer.length = 0x0102030405060708ULL;
    const Message back = swap_numbers(swap_numbers(offer));
    EXPECT_EQ(back.length, offer.length);
    EXPECT_EQ(message_error(back), "(nothing thrown)");

    Message m = offer;
    m.magic = 0x52444654; // the RDMA pair's "RDFT": never mixed up with the twin's
    EXPECT_EQ(message_error(m), "the sender sent 0x52444654 where a message starts; not tcp_file_transfer's");
    m = offer;
    m.version = 2;
    EXPECT_EQ(message_error(m), "the sender speaks protocol version 2; this program speaks version 1");
    m = offer;
    std::memset(m.text, 'x', sizeof m.text);
    EXPECT_EQ(message_error(m), "the sender sent a offer whose text has no NUL in its 384 bytes");
    EXPECT_EQ(message_error(make_message(Type::done), Type::offer),
              "the sender sent a done message while we waited for the offer");
    m = make_message(Type::offer);
    m.type = 9;
    EXPECT_EQ(message_error(m), "the sender sent a unknown type 9 message while we waited for the offer");
    EXPECT_EQ(message_error(make_message(Type::refusal, "no room\nfree some")), "the sender refused: \"no room\"");
}

TEST(TcpFileTransfer, ChunkDoneAndVerdictAtTheirBounds)
{
    Message accept = make_message(Type::accept);
    for (std::uint32_t chunk : {1U, rdma_file_transfer::max_chunk}) {
        accept.chunk = chunk;
        EXPECT_NO_THROW(check_accept(accept));
    }
    for (std::uint32_t chunk : {0U, rdma_file_transfer::max_chunk + 1}) {
        accept.chunk = chunk;
        EXPECT_THROW(check_accept(accept), Error);
    }
    Message done = make_message(Type::done);
    done.length = 10;
    EXPECT_NO_THROW(check_done(done, 10));
    EXPECT_THROW(check_done(done, 11), Error);

    const Digest ours{1, 2, 3};
    Message verdict = make_message(Type::verdict);
    verdict.flags = 1;
    verdict.digest = ours;
    EXPECT_EQ(verdict_error(verdict, ours), "(nothing thrown)");
    verdict.flags = 2;
    EXPECT_EQ(verdict_error(verdict, ours), "the receiver's verdict has flags 2; expected 0 or 1");
    verdict.flags = 1;
    verdict.digest = Digest{9};
    EXPECT_NE(verdict_error(verdict, ours).find(": not trusted"), std::string::npos); // "match" with another digest
    verdict.flags = 0;
    EXPECT_NE(verdict_error(verdict, ours).find(": the data was damaged"), std::string::npos);
}

TEST(TcpFileTransfer, FlagsAreTheRdmaPairsWithoutRdma)
{
    SenderOptions sender;
    const rdma_samples::ProgramSpec sender_flags = sender_spec(sender);
    parse(sender_flags, {"-sa", "::1", "-lp", "2000", "--name", "n", "f/g"});
    EXPECT_EQ(sender.server_addr, "::1");
    EXPECT_EQ(sender.port, 2000);
    EXPECT_EQ(sender.file, "f/g");
    EXPECT_EQ(sender.name, "n");
    EXPECT_THROW(parse(sender_flags, {"-sa", "example.org", "f"}), rdma_samples::UsageError);
    for (const char *rdma_only : {"-d", "-g", "-sat", "-cm", "--id", "-ld"})
        EXPECT_THROW(parse(sender_flags, {rdma_only, "1", "f"}), rdma_samples::UsageError) << rdma_only;
    EXPECT_EQ(rdma_samples::usage(sender_flags).find("--device"), std::string::npos);

    ReceiverOptions receiver;
    const rdma_samples::ProgramSpec receiver_flags = receiver_spec(receiver);
    parse(receiver_flags, {"-o", "out", "--force", "--chunk", "4096", "--max-size", "7"});
    EXPECT_EQ(receiver.out, "out");
    EXPECT_TRUE(receiver.force);
    EXPECT_EQ(receiver.chunk, 4096U);
    EXPECT_EQ(receiver.max_size, 7U);
    EXPECT_EQ(ReceiverOptions{}.chunk, rdma_file_transfer::ReceiverOptions{}.chunk); // the RDMA receiver's default
    EXPECT_THROW(parse(receiver_flags, {"--slots", "4"}), rdma_samples::UsageError);
}
